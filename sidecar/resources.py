"""Heavy resources (database pool, Redis, models), attached at start-up and never at import."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import redis

from models import ModelError
from models import load_embedder as load_onnx_embedder
from models import load_reranker as load_onnx_reranker
from models.client import RemoteReranker
from models.client_apis import remote_embedder
from models.protocols import Embedder, Reranker
from sidecar.db import Database
from sidecar.db.embeddings import RegisteredModel, register_model
from sidecar.db.migrate import check_current, parse_version, pgvector_version, upgrade
from sidecar.db.pool import DictConn
from sidecar.errors import ConfigurationError
from sidecar.model_setup import ensure_model
from sidecar.profile import ProfileState, load_served
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
    profile: ProfileState
    reranker: Reranker | None = None
    reranker_error: str | None = None
    extras: dict[str, Any] = field(default_factory=dict)
    owned_models: tuple[Any, ...] = ()  # built by start_resources, so closed by close()

    def close(self) -> None:
        """Release connections (the embedded servers stop when their last user exits)."""
        self.search.keyword.close()
        self.db.close()
        self.redis.close()
        for model in self.owned_models:
            close = getattr(model, "close", None)  # remote models hold an HTTP pool
            if callable(close):
                close()


def load_embedder(settings: Settings) -> Embedder:
    """The configured embedder: a remote model host or an in-process ONNX model.

    An in-process model missing from the state directory is prepared first (``ensure_model``).
    """
    if settings.embed_url:
        key = settings.embed_api_key.get_secret_value() if settings.embed_api_key else None
        remote = remote_embedder(settings.embed_api, settings.embed_url,
                                 name=settings.embed_model, timeout=settings.model_timeout_s,
                                 api_key=key)
        try:
            remote.info()  # the vectors' size must be known to register the model
        except ModelError as exc:
            remote.close()
            raise ConfigurationError(f"the embedding model host failed ({settings.embed_api} "
                                     f"API): {exc}") from exc
        return remote
    path = ensure_model(settings)
    try:
        embedder = load_onnx_embedder(path, provider=settings.onnx_provider,
                                      threads=settings.onnx_threads)
        embedder.warmup()
    except ModelError as exc:  # the message names the file and the reason
        raise ConfigurationError(f"the embedding model failed to load: {exc}") from exc
    return embedder


def register_embedder(conn: DictConn, embedder: Embedder) -> RegisteredModel:
    """Register a loaded embedder under its name (its dimensions must match the stored ones)."""
    manifest = getattr(embedder, "manifest", None)
    return register_model(
        conn,
        name=embedder.name,
        dimensions=embedder.dimensions,
        version=getattr(manifest, "version", 1),
        max_length=embedder.max_length,
        pooling=getattr(manifest, "pooling", None),
        checksum=getattr(manifest, "checksum", None),
    )


def load_reranker(settings: Settings) -> tuple[Reranker | None, str | None]:
    """The configured cross-encoder, or (None, why) — reranking degrades, it never blocks start."""
    if settings.rerank_url:
        key = settings.rerank_api_key.get_secret_value() if settings.rerank_api_key else None
        # Lazy: a model host that is down now only disables reranking until it is back.
        return RemoteReranker(settings.rerank_url, name=settings.rerank_model,
                              timeout=settings.model_timeout_s, api_key=key), None
    path = settings.rerank_dir()
    if path is None:
        return None, None
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
    """Start or join the services, migrate, load the models and register the embedding model.

    With ``migrate=False`` (the API's workers) the schema is only checked: migrations belong to
    ``sidecar db upgrade``, run once, not to every process that starts.
    """
    urls = resolve_services(settings)
    info = upgrade(urls.database_url) if migrate else None
    if not migrate:
        check_current(urls.database_url)
    db = Database(urls.database_url, min_size=settings.db_pool_min, max_size=settings.db_pool_max)
    db.open()
    with db.connection() as conn:
        version = pgvector_version(conn)
    pgvector = version if version is not None else str(info["pgvector"] if info else "")
    redis_client = redis.Redis.from_url(urls.redis_url)
    owned: list[Any] = []
    if embedder is None:
        embedder = load_embedder(settings)
        owned.append(embedder)
    reranker_error = None
    if reranker is None:
        reranker, reranker_error = load_reranker(settings)
        owned.append(reranker)
    with db.connection() as conn:
        model = register_embedder(conn, embedder)
    profile = load_served(settings, model.name)
    search = SearchService(db, embedder, model, settings,
                           iterative_scan=parse_version(pgvector) >= (0, 8, 0),
                           served=profile.config, served_details=profile.details_config)
    return Resources(settings=settings, urls=urls, db=db, redis=redis_client, embedder=embedder,
                     model=model, pgvector=pgvector, search=search, profile=profile,
                     reranker=reranker,
                     reranker_error=reranker_error, owned_models=tuple(owned))
