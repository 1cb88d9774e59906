"""gunicorn hooks, kept free of heavy imports.

gunicorn's master imports this module; it must never import ONNX Runtime (its thread pools do
not survive the fork of the workers, which then hang or abort on exit), so nothing here imports
the app, the models or the resources at module level.
"""

from __future__ import annotations

from typing import Any


def worker_exit(_arbiter: Any, worker: Any) -> None:
    """Close the worker's connection pool so it exits at once (its threads are not daemons)."""
    app = getattr(worker, "wsgi", None)
    extensions = getattr(app, "extensions", None)
    resources = extensions.get("sidecar") if isinstance(extensions, dict) else None
    if resources is not None:
        resources.close()
