"""One gunicorn configuration for every launcher: `sidecar run`, `sidecar serve`,
`sidecar model-host` and ``deploy/gunicorn.conf.py``.

Each launcher takes its options from here, so graceful shutdown, the trusted proxy addresses,
logging and worker counts cannot drift apart between the demo, the production entry point and
the deploy file. The two apps differ only where they must: the model host allows long first
batches and keeps the sidecar's connection open longer.

gunicorn's master imports this module: it stays light (no app, no models, no ONNX Runtime,
whose thread pools do not survive the fork into the workers).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from gunicorn.app.base import BaseApplication

from sidecar.api.gunicorn_hooks import on_starting, worker_exit
from sidecar.config.networks import canonical
from sidecar.config.settings import Settings

if TYPE_CHECKING:
    from flask import Flask

# Seconds a worker has to finish its requests after SIGTERM before it is killed.
GRACEFUL_TIMEOUT = 30
# Behind a reverse proxy (nginx, Caddy): trust its X-Forwarded-Proto (and friends) for the
# scheme from SIDECAR_TRUSTED_PROXIES only, and only when SIDECAR_PROXY_HOPS says there are
# proxies to trust: with 0, a client next to the sidecar could otherwise claim https.


# The model host's unix socket: srw-rw---- (owner and group: the sidecar's API and worker).
SOCKET_UMASK = 0o117


def common_options(settings: Settings) -> dict[str, Any]:
    """What every sidecar gunicorn shares, whichever app it serves."""
    return {
        "worker_class": "gthread",
        # The app is built in each worker after the fork: ONNX Runtime sessions and database
        # pools must not cross it.
        "preload_app": False,
        "graceful_timeout": GRACEFUL_TIMEOUT,
        "forwarded_allow_ips": canonical(settings.trusted_proxies) if settings.proxy_hops
                               else "",
        "errorlog": "-",
        "loglevel": settings.log_level.lower(),
        # gunicorn >= 25 opens a control socket at one fixed path per user: the API and the
        # model host on one machine would clash on it, and nothing here uses it.
        "control_socket_disable": True,
    }


def api_options(settings: Settings, workers: int | None = None) -> dict[str, Any]:
    """The sidecar API (``SIDECAR_HOST``/``PORT``/``WORKERS``/``THREADS``); ``workers``
    overrides the setting (``sidecar run --workers``)."""
    return {
        **common_options(settings),
        "bind": f"{settings.host}:{settings.port}",
        "workers": workers or settings.workers,
        "threads": settings.threads,
        # A search embeds the query and may rerank: seconds at worst, never minutes.
        "timeout": 120,
        "keepalive": 5,
        "accesslog": "-",
        "proc_name": "sidecar-api",
        # Metrics of every worker added up (PROMETHEUS_MULTIPROC_DIR, emptied at start); each
        # worker's connection pool closed on exit (its threads are not daemons).
        "on_starting": on_starting,
        "worker_exit": worker_exit,
    }


def model_host_options(settings: Settings, *, host: str | None = None, port: int | None = None,
                       workers: int = 1, threads: int = 16,
                       access_log: bool = False) -> dict[str, Any]:
    """The model host (``SIDECAR_MODEL_HOST_HOST``/``PORT`` unless given; a ``unix:/path`` host
    is the socket itself, no port)."""
    host = host or settings.model_host_host
    return {
        **common_options(settings),
        "bind": host if host.startswith("unix:") else
        f"{host}:{port or settings.model_host_port}",
        "workers": workers,
        "threads": threads,
        "timeout": 300,  # a first bge-m3 batch on a slow CPU can take a while
        "keepalive": 30,  # the sidecar keeps its connection to us open
        "accesslog": "-" if access_log else None,
        "proc_name": "sidecar-model-host",
        # A unix socket counts as loopback (no key needed), so only its owner and group may
        # connect: gunicorn creates it under this umask (its default, 0, makes it 0777).
        "umask": SOCKET_UMASK,
    }


class GunicornApp(BaseApplication):
    """gunicorn run from Python with options from this module; ``load`` builds the app in each
    worker, after the fork."""

    def __init__(self, options: dict[str, Any], load: Callable[[], Flask]) -> None:
        self.options = options
        self._load = load
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            if key in self.cfg.settings:  # skips settings an older gunicorn does not have
                self.cfg.set(key, value)

    def load(self) -> Flask:
        return self._load()
