"""Access to the app's resources from a request, as flaskr's ``get_db`` does."""

from __future__ import annotations

from typing import TypeVar

from flask import current_app, request
from pydantic import BaseModel

from sidecar.api.metrics import Metrics
from sidecar.resources import Resources

M = TypeVar("M", bound=BaseModel)


def get_resources() -> Resources:
    """The resources attached to the running app at start-up."""
    resources: Resources = current_app.extensions["sidecar"]
    return resources


def get_metrics() -> Metrics:
    """The app's Prometheus metrics."""
    metrics: Metrics = current_app.extensions["sidecar_metrics"]
    return metrics


def parse_body(model: type[M]) -> M:
    """Validate the JSON body against ``model``; errors become JSON 4xx in ``errors.py``."""
    return model.model_validate_json(request.get_data(cache=True) or b"")
