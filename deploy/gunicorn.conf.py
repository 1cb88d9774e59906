"""gunicorn configuration of the sidecar API, built on the app factory.

    gunicorn -c deploy/gunicorn.conf.py

Everything comes from the same ``SIDECAR_*`` settings as the rest of the sidecar (bind address,
workers, threads, log level), so the environment file of the systemd unit is the only place to
configure it. The app is created in each worker after the fork (no ``preload_app``): ONNX Runtime
sessions and database pools must not cross a fork. Workers never migrate: run
``sidecar db upgrade`` first (the systemd unit's ExecStartPre does).
"""

from sidecar.settings import load_settings

_settings = load_settings()

wsgi_app = "sidecar.api.app:create_app()"
bind = f"{_settings.host}:{_settings.port}"
workers = _settings.workers
threads = _settings.threads
worker_class = "gthread"
preload_app = False
# A search embeds the query and may rerank: seconds at worst, never minutes.
timeout = 120
graceful_timeout = 30
keepalive = 5
accesslog = "-"
errorlog = "-"
loglevel = _settings.log_level.lower()
# Behind a reverse proxy on the same machine (nginx, Caddy): trust its X-Forwarded-* headers.
forwarded_allow_ips = "127.0.0.1,::1"
proc_name = "sidecar-api"


# Metrics of every worker added up (PROMETHEUS_MULTIPROC_DIR, emptied at start); each worker's
# connection pool closed on exit (its threads are not daemons).
from sidecar.gunicorn_hooks import on_starting, worker_exit  # noqa: E402, F401
