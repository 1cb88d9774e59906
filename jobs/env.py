"""What enqueuing and watching jobs needs: settings, database, Redis, a registered model.

:class:`Env` is the part of :class:`sidecar.resources.Resources` the driver and the events use,
so the API and the worker pass their resources as they are. Commands that only enqueue or watch
(``sidecar backfill`` without ``--sync``, ``sidecar backfill status``) open a :class:`LightEnv`
instead: it never loads a model, which on a small server matters while the worker and the API
already hold one each.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import redis

from models.manifest import read_manifest
from sidecar.db import Database
from sidecar.db.embeddings import RegisteredModel, find_model, register_model
from sidecar.db.migrate import upgrade
from sidecar.errors import ConfigurationError
from sidecar.model_setup import ensure_model
from sidecar.services import ServiceUrls, resolve_services
from sidecar.settings import Settings


class Env(Protocol):
    """Settings, service URLs, the pool, Redis and the serving model."""

    settings: Settings
    urls: ServiceUrls
    db: Database
    redis: redis.Redis
    model: RegisteredModel


@dataclass
class LightEnv:
    """An :class:`Env` without loaded models."""

    settings: Settings
    urls: ServiceUrls
    db: Database
    redis: redis.Redis
    model: RegisteredModel

    def close(self) -> None:
        """Release the connections."""
        self.db.close()
        self.redis.close()


def resolve_model(db: Database, settings: Settings, name: str | None = None) -> RegisteredModel:
    """The registered model ``name`` (default: the configured one), registered from its manifest.

    A prepared model directory (``<state_dir>/models/<name>``, or ``SIDECAR_EMBED_MODEL_PATH``
    for the configured model) is registered from its ``manifest.json`` without loading the
    model; else a model registered before (by a worker, an API node) is used as it is. The
    configured model found nowhere is set up on first need: a remote one (``SIDECAR_EMBED_URL``)
    is asked its vectors' size once, a local one is prepared (``ensure_model``).
    """
    name = name or settings.embed_model
    path = settings.embed_dir() if name == settings.embed_model else settings.models_dir / name
    if not (path / "manifest.json").is_file():
        with db.connection() as conn:
            model = find_model(conn, name)
        if model is not None:
            return model
        if name != settings.embed_model:
            raise ConfigurationError(
                f"model {name!r} is neither prepared in {path} nor registered: prepare it "
                f"(`sidecar models prepare ... --out {path}`) or start the worker once"
            )
        if settings.embed_url:
            # Heavy dependency: sidecar.resources brings the search stack (numpy, Tantivy),
            # which a LightEnv never needs otherwise.
            from sidecar.resources import load_embedder, register_embedder

            remote = load_embedder(settings)  # one call to the host: its vectors' size
            try:
                with db.connection() as conn:
                    return register_embedder(conn, remote)
            finally:
                remote.close()  # type: ignore[attr-defined]  # a RemoteEmbedder
        ensure_model(settings)  # prepared on first need, as the worker does
    manifest = read_manifest(path)
    with db.connection() as conn:
        return register_model(conn, name=manifest.name, dimensions=manifest.dimensions,
                              version=manifest.version, max_length=manifest.max_length,
                              pooling=manifest.pooling, checksum=manifest.checksum)


def open_env(settings: Settings, model: str | None = None, *, migrate: bool = True) -> LightEnv:
    """Join (or start) the services, migrate, and resolve the model, loading no model."""
    urls = resolve_services(settings)
    if migrate:
        upgrade(urls.database_url)
    db = Database(urls.database_url, min_size=1, max_size=2)
    db.open()
    client = redis.Redis.from_url(urls.redis_url)
    try:
        registered = resolve_model(db, settings, model)
    except Exception:
        db.close()
        client.close()
        raise
    return LightEnv(settings=settings, urls=urls, db=db, redis=client, model=registered)
