"""gunicorn hooks, kept free of heavy imports.

gunicorn's master imports this module; it must never import ONNX Runtime (its thread pools do
not survive the fork of the workers, which then hang or abort on exit), so nothing here imports
the app, the models or the resources at module level.

Metrics: each worker is a process with its own counters, so ``/metrics`` would show whichever
worker answers the scrape. Prometheus' multiprocess mode has every worker write its samples to
files in ``PROMETHEUS_MULTIPROC_DIR``, and a scrape adds them up. ``on_starting`` (in the master,
before any worker exists) picks the directory (the setting, else ``<state_dir>/prometheus``),
empties it of an earlier run's files, and exports it to the workers; ``worker_exit`` marks the
worker dead (its live gauges go; its counters keep counting in the totals).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from sidecar.config.settings import load_settings

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"


def prepare_metrics_dir(directory: Path) -> Path:
    """Create and empty the multiprocess directory, and export it to this process's children."""
    directory = directory.resolve()
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):
        stale.unlink()
    os.environ[MULTIPROC_ENV] = str(directory)
    values = sys.modules.get("prometheus_client.values")
    if values is not None:  # imported already: its value class was chosen without the directory
        values.ValueClass = values.get_value_class()  # type: ignore[attr-defined]
    return directory


def on_starting(_arbiter: Any) -> None:
    """Once, in the master, before the workers: the metrics directory."""
    settings = load_settings()
    configured = os.environ.get(MULTIPROC_ENV) or settings.prometheus_multiproc_dir
    prepare_metrics_dir(Path(configured) if configured else settings.state_dir / "prometheus")


def worker_exit(_arbiter: Any, worker: Any) -> None:
    """Close the worker's connection pool so it exits at once (its threads are not daemons), and
    mark it dead for the metrics."""
    # Fork safety: this module is loaded by gunicorn's master, which must not import the app;
    # here, in the worker, the app is imported already.
    from flask import Flask

    from sidecar.api.context import resources_of

    app = getattr(worker, "wsgi", None)
    res = resources_of(app) if isinstance(app, Flask) else None
    if res is not None:
        res.close()
    if os.environ.get(MULTIPROC_ENV):
        # Fork safety (metrics): prometheus_client chooses its value class when first imported,
        # which must come after on_starting has exported the directory.
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)
