"""Loading the configured models and registering the embedding model, for the resources.

The embedding model comes from a remote model host or a prepared ONNX directory; the
cross-encoder is optional and degrades instead of blocking start-up. Resources opened without
models still need the registered model (jobs and runs name it): :func:`resolve_model` registers
it from its manifest without loading it.
"""

from __future__ import annotations

import logging
from pathlib import Path

from models import ModelError
from models import load_embedder as load_onnx_embedder
from models import load_reranker as load_onnx_reranker
from models.client import RemoteReranker
from models.client_apis import remote_embedder
from models.manifest import read_manifest
from models.protocols import Embedder, Reranker
from sidecar.config.settings import Settings
from sidecar.core.rerank_score import Residual
from sidecar.db import Database
from sidecar.db.embeddings import RegisteredModel, find_model, register_model
from sidecar.db.pool import DictConn
from sidecar.errors import ConfigurationError
from sidecar.runtime.model_setup import ensure_model

log = logging.getLogger(__name__)


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


def load_prepared_embedder(settings: Settings, model: RegisteredModel,
                           path: Path | None = None) -> Embedder:
    """The embedder of a registered model other than the serving one, from its prepared dir.

    Jobs keep every (model, strategy) that has vectors fresh: such a model is loaded from
    ``path`` (default ``<state_dir>/models/<name>``), and its dimensions must match the
    registry.
    """
    path = path or settings.models_dir / model.name
    if not (path / "manifest.json").is_file():
        raise ConfigurationError(
            f"model {model.name!r} is registered but not prepared in {path}: run "
            f"`sidecar models prepare ... --out {path}` on the worker's machine"
        )
    embedder = load_onnx_embedder(path, provider=settings.onnx_provider,
                                  threads=settings.onnx_threads)
    if embedder.dimensions != model.dimensions:
        raise ConfigurationError(
            f"{path} has {embedder.dimensions} dimensions but {model.name!r} is "
            f"registered with {model.dimensions}"
        )
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


def load_reranker(settings: Settings, promoted: Path | None = None
                  ) -> tuple[Reranker | None, str | None]:
    """The configured cross-encoder, else the forum's promoted one (``promoted``, its model
    directory), or (None, why) — reranking degrades, it never blocks start."""
    if settings.rerank_url:
        key = settings.rerank_api_key.get_secret_value() if settings.rerank_api_key else None
        # Lazy: a model host that is down now only disables reranking until it is back.
        return RemoteReranker(settings.rerank_url, name=settings.rerank_model,
                              timeout=settings.model_timeout_s, api_key=key), None
    path = settings.rerank_dir() or promoted
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


def residual_of(reranker: Reranker, model: RegisteredModel, strategy: int) -> Residual | None:
    """The cosine a forum-trained reranker corrects (its manifest's training record), or None
    for a general cross-encoder. Raises :class:`ConfigurationError` when it was trained over
    another embedding model or strategy: its corrections mean nothing over other cosines."""
    manifest = getattr(reranker, "manifest", None)
    record = getattr(manifest, "training", None) or {}
    found = record.get("residual")
    if not found:
        return None
    residual = Residual(model=str(found["model"]), strategy=int(found["strategy"]),
                        cosine_weight=float(found["cosine_weight"]), bias=float(found["bias"]))
    if (residual.model, residual.strategy) != (model.name, strategy):
        raise ConfigurationError(
            f"reranker {reranker.name} corrects the cosine of {residual.model} strategy "
            f"{residual.strategy}, this sidecar searches {model.name} strategy {strategy}: "
            "train it again (`sidecar train-reranker`)")
    return residual
