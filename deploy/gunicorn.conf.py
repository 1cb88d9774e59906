"""gunicorn configuration of the sidecar API, built on the app factory.

    gunicorn -c deploy/gunicorn.conf.py

The options are those of `sidecar serve` (:func:`sidecar.api.gunicorn_config.api_options`), built
from the same ``SIDECAR_*`` settings as the rest of the sidecar (bind address, workers, threads,
log level), so the environment file of the systemd unit is the only place to configure it. The
app is created in each worker after the fork (no ``preload_app``): ONNX Runtime sessions and
database pools must not cross a fork. Workers never migrate: run ``sidecar db upgrade`` first
(the systemd unit's ExecStartPre does).
"""

from sidecar.api.gunicorn_config import api_options
from sidecar.config.settings import load_settings

wsgi_app = "sidecar.api.app:create_app()"
# gunicorn reads this module's names as its settings.
globals().update(api_options(load_settings()))
