"""The worker process's resources: installed once, then found by the job functions.

Job functions take ids, never objects, so they look the process's :class:`Resources` up here.
``sidecar worker`` starts them (models loaded) and calls :func:`install` before its first job.
A plain ``rq worker`` installs nothing: its first job starts them explicitly through
:func:`start_from_environment`, which says so in the log, once per process. RQ failure
callbacks may run in any process that cleans RQ's registries (a worker's maintenance,
``rq info``), where loading a model would be out of place: :func:`for_callbacks` gives them the
installed resources, or resources started without models.
"""

from __future__ import annotations

import logging
import threading

from sidecar.config.settings import load_settings
from sidecar.runtime.resources import Resources, start_resources

log = logging.getLogger(__name__)

_INSTALLED: Resources | None = None
_WITHOUT_MODELS: Resources | None = None  # for failure callbacks, where none is installed
_LOCK = threading.Lock()


def install(res: Resources) -> None:
    """Make ``res`` the process's resources for jobs (``sidecar worker``, tests, benchmarks)."""
    global _INSTALLED
    with _LOCK:
        _INSTALLED = res


def uninstall() -> None:
    """Forget the installed resources (the caller closes them)."""
    global _INSTALLED
    with _LOCK:
        _INSTALLED = None


def installed() -> Resources | None:
    """The installed resources, if any."""
    return _INSTALLED


def start_from_environment() -> Resources:
    """Start the resources from the environment's settings, models loaded, and install them.

    For jobs run by a plain ``rq worker``, which installs nothing (``sidecar worker`` does);
    when resources are installed already (another thread started them first), those are kept.
    """
    global _INSTALLED
    with _LOCK:
        if _INSTALLED is None:
            log.warning("no resources installed (a plain `rq worker`, not `sidecar worker`): "
                        "starting them from the environment, models included")
            _INSTALLED = start_resources(load_settings(), purpose="worker")
        return _INSTALLED


def for_callbacks() -> Resources:
    """The installed resources, or else resources without models (started once, kept).

    For RQ failure callbacks, which may run in a process that is no worker.
    """
    global _WITHOUT_MODELS
    with _LOCK:
        if _INSTALLED is not None:
            return _INSTALLED
        if _WITHOUT_MODELS is None:
            log.info("no resources installed: starting them without models for RQ callbacks")
            _WITHOUT_MODELS = start_resources(load_settings(), load_models=False,
                                              migrate=False, purpose="worker")
        return _WITHOUT_MODELS
