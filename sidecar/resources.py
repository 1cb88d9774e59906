"""Heavy resources (database pool, Redis, models), attached at start-up and never at import."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import redis

from models.protocols import Embedder, Reranker
from sidecar.db import Database
from sidecar.db.embeddings import RegisteredModel, register_model
from sidecar.db.migrate import parse_version, upgrade
from sidecar.errors import ConfigurationError
from sidecar.search import SearchService
from sidecar.services import ServiceUrls, resolve_services
from sidecar.settings import Settings

log = logging.getLogger(__name__)


@dataclass
class Resources:
    """Everything a request handler, a job or a CLI command needs, built once per process."""

    settings: Settings
    urls: ServiceUrls
    db: Database
    redis: redis.Redis
    embedder: Embedder
    model: RegisteredModel
    pgvector: str
    search: SearchService
    reranker: Reranker | None = None
    reranker_error: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)

    def close(self) -> None:
        """Release connections (the embedded servers stop when their last user exits)."""
        self.db.close()
        self.redis.close()


def load_embedder(settings: Settings) -> Embedder:
    """The configured embedder: a remote TEI-compatible host or an in-process ONNX model."""
    if settings.embed_url:
        from models.client import RemoteEmbedder

        return RemoteEmbedder(settings.embed_url, name=settings.embed_model,
                              timeout=settings.model_timeout_s)
    from models import load_embedder as load_onnx_embedder

    path = settings.embed_dir()
    if not (path / "manifest.json").is_file():
        raise ConfigurationError(
            f"no prepared model in {path}: run `sidecar models prepare {settings.embed_source} "
            f"--task embed --out {path}` (or `make run`, which prepares the demo model)"
        )
    embedder = load_onnx_embedder(path, provider=settings.onnx_provider,
                                  threads=settings.onnx_threads)
    embedder.warmup()
    return embedder


def load_reranker(settings: Settings) -> tuple[Reranker | None, str | None]:
    """The configured cross-encoder, or (None, why) — reranking degrades, it never blocks start."""
    if settings.rerank_url:
        from models.client import RemoteReranker

        return RemoteReranker(settings.rerank_url, name=settings.rerank_model or "remote",
                              timeout=settings.model_timeout_s), None
    path = settings.rerank_dir()
    if path is None:
        return None, None
    from models import load_reranker as load_onnx_reranker

    try:
        reranker = load_onnx_reranker(path, provider=settings.onnx_provider,
                                      threads=settings.onnx_threads)
        reranker.warmup()
        return reranker, None
    except Exception as exc:  # a broken reranker must not take search down with it
        log.error("cross-encoder %s failed to load: %s", path, exc)
        return None, f"{type(exc).__name__}: {exc}"


def start_resources(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    migrate: bool = True,
) -> Resources:
    """Start or join the services, migrate, load the models and register the embedding model."""
    urls = resolve_services(settings)
    info = upgrade(urls.database_url) if migrate else None
    db = Database(urls.database_url, min_size=settings.db_pool_min, max_size=settings.db_pool_max)
    db.open()
    with db.connection() as conn:
        row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                           ).fetchone()
    pgvector = str(row["extversion"]) if row else str(info["pgvector"] if info else "")
    redis_client = redis.Redis.from_url(urls.redis_url)
    embedder = embedder or load_embedder(settings)
    reranker_error = None
    if reranker is None:
        reranker, reranker_error = load_reranker(settings)
    with db.connection() as conn:
        manifest = getattr(embedder, "manifest", None)
        model = register_model(
            conn,
            name=embedder.name,
            dimensions=embedder.dimensions,
            version=getattr(manifest, "version", 1),
            max_length=embedder.max_length,
            pooling=getattr(manifest, "pooling", None),
            checksum=getattr(manifest, "checksum", None),
        )
    search = SearchService(db, embedder, model, settings,
                           iterative_scan=parse_version(pgvector) >= (0, 8, 0))
    return Resources(settings=settings, urls=urls, db=db, redis=redis_client, embedder=embedder,
                     model=model, pgvector=pgvector, search=search, reranker=reranker,
                     reranker_error=reranker_error)
