"""`sidecar model-host`: serve the prepared models over TEI's HTTP API with gunicorn."""

from __future__ import annotations

import ipaddress
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from flask import Flask

from sidecar.api.gunicorn_config import GunicornApp, model_host_options
from sidecar.cli.output import echo_json
from sidecar.config.settings import Settings
from sidecar.errors import ConfigurationError

# Deferred imports (fork safety): each command imports what it needs when it runs. Every command
# module is imported by `sidecar serve` and `sidecar model-host`, which fork gunicorn workers:
# ONNX Runtime's and numpy's thread pools must not be loaded before that fork (and every other
# command starts faster).

log = logging.getLogger(__name__)

Task = str  # "all" | "embed" | "rerank"


def model_dirs(settings: Settings, task: Task) -> dict[str, Path]:
    """The model directories to serve, checked without loading them (fails with path + reason).

    ``all`` serves the embedder and, when one is configured, the cross-encoder.
    """
    # Only light modules here: this runs in gunicorn's master, which must not load ONNX
    # Runtime or numpy (their threads do not survive the fork into the workers).
    from models.errors import ModelError
    from models.manifest import read_manifest

    dirs: dict[str, Path] = {}
    if task in ("all", "embed"):
        dirs["embed"] = settings.embed_dir()
    rerank = settings.rerank_dir()
    if task == "rerank" and rerank is None:
        raise ConfigurationError("no cross-encoder configured: set SIDECAR_RERANK_MODEL_PATH "
                                 "(or SIDECAR_RERANK_MODEL)")  # fmt: skip
    if task in ("all", "rerank") and rerank is not None:
        dirs["rerank"] = rerank
    for kind, path in dirs.items():
        try:
            manifest = read_manifest(path)
        except ModelError as exc:
            raise ConfigurationError(f"{exc} — prepare it with `sidecar models prepare SOURCE "
                                     f"--task {kind} --out {path}`") from exc  # fmt: skip
        if manifest.task != kind:
            raise ConfigurationError(f"cannot load model at {path}: it is a {manifest.task!r} "
                                     f"model, expected {kind!r}")  # fmt: skip
        for name in (manifest.onnx_file, "tokenizer.json"):
            if not (path / name).is_file():
                raise ConfigurationError(f"cannot load model at {path / name}: file not found")
    return dirs


def is_loopback(host: str) -> bool:
    """True for an address only this machine reaches: 127.0.0.0/8, ::1, localhost, or a unix
    socket (``unix:/path``, guarded by its file's permissions)."""
    name = host.strip().strip("[]").lower()
    if name.startswith("unix:") or name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


def check_bind(settings: Settings, host: str) -> None:
    """Refuse to serve the models beyond this machine without a key, unless the operator
    said so (``SIDECAR_MODEL_HOST_ALLOW_OPEN``: a firewall or a private network guards them)."""
    if is_loopback(host) or settings.model_host_api_key is not None \
            or settings.model_host_allow_open:
        return
    raise ConfigurationError(
        f"the model host would listen on {host} without a key, for anyone who reaches the "
        "port: set SIDECAR_MODEL_HOST_API_KEY (the sidecar sends it as SIDECAR_EMBED_API_KEY), "
        "listen on 127.0.0.1, or set SIDECAR_MODEL_HOST_ALLOW_OPEN=true if a firewall guards it")


def load_models(settings: Settings, dirs: dict[str, Path]) -> tuple[Any, Any]:
    """Load and warm up the models of ``dirs`` with the configured provider and threads."""
    from models import ModelError, load_embedder, load_reranker

    loaded: dict[str, Any] = {}
    for kind, path in dirs.items():
        loader = load_embedder if kind == "embed" else load_reranker
        try:
            model = loader(path, provider=settings.onnx_provider, threads=settings.onnx_threads)
            model.warmup()
        except ModelError as exc:
            raise ConfigurationError(f"the {kind} model failed to load: {exc}") from exc
        log.info("%s model %s loaded from %s on %s", kind, model.name, path, model.provider)
        loaded[kind] = model
    return loaded.get("embed"), loaded.get("rerank")


def _host_loader(settings: Settings, dirs: dict[str, Path]) -> Callable[[], Flask]:
    """What each gunicorn worker runs after the fork: load its own models, build the app."""

    def load() -> Flask:
        # Fork safety: ONNX Runtime sessions and their thread pools must not cross a fork, so
        # the host app (numpy, ONNX Runtime) is imported and built in the worker only.
        from models.host import create_host_app

        try:
            embedder, reranker = load_models(settings, dirs)
        except ConfigurationError as exc:
            log.error("%s", exc.message)
            for handler in logging.getLogger().handlers:
                handler.flush()
            # Exit code 3 makes the gunicorn master stop with "Worker failed to boot" instead
            # of respawning; os._exit because a forked worker can hang in interpreter shutdown
            # on locks its parent's threads held at fork time.
            os._exit(3)
        return create_host_app(embedder, reranker, settings=settings)

    return load


@click.command("model-host")
@click.option("--task", type=click.Choice(["all", "embed", "rerank"]), default="all",
              show_default=True,
              help="Which models to serve: `all` = the embedder and the configured cross-encoder.")
@click.option("--host", default=None, help="Default: SIDECAR_MODEL_HOST_HOST (127.0.0.1).")
@click.option("--port", type=int, default=None, help="Default: SIDECAR_MODEL_HOST_PORT (8341).")
@click.option("--workers", type=int, default=1, show_default=True,
              help="Processes; each loads its own copy of the models. One per GPU/iGPU.")
@click.option("--threads", type=int, default=16, show_default=True,
              help="Request threads per worker: concurrent requests share model calls.")
@click.option("--access-log", is_flag=True, help="Log every request.")
@click.option("--check", is_flag=True,
              help="Load the models, print their /info, and exit (0 when they load).")
@click.pass_obj
def model_host(settings: Settings, task: Task, host: str | None, port: int | None,
               workers: int, threads: int, access_log: bool, check: bool) -> None:
    """Serve the embedder and cross-encoder over TEI's and OpenAI's APIs (/embed, /rerank,
    /v1/embeddings, /info, /health...)."""
    if not check:
        check_bind(settings, host or settings.model_host_host)
    if task in ("all", "embed"):
        from sidecar.runtime.model_setup import prepare_before_fork

        # The embedder this host serves, prepared on first need (the demo model, offline).
        prepare_before_fork(settings.model_copy(update={"embed_url": None}))
    dirs = model_dirs(settings, task)
    if check:
        from models.host import close_host_app, create_host_app

        app = create_host_app(*load_models(settings, dirs), settings=settings)
        try:
            echo_json(app.test_client().get("/info").json)
        finally:
            close_host_app(app)
        return
    options = model_host_options(settings, host=host, port=port, workers=workers,
                                 threads=threads, access_log=access_log)
    click.echo(f"model host on http://{options['bind']} serving {', '.join(sorted(dirs))}",
               err=True)
    GunicornApp(options, _host_loader(settings, dirs)).run()
