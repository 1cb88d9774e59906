"""Access to the app's resources from a request, as flaskr's ``get_db`` does."""

from __future__ import annotations

from typing import TypeVar

from flask import Response, current_app, request
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


def parse_query(model: type[M]) -> M:
    """Validate the query string against ``model``, the one the route documents its
    parameters with; errors become JSON 4xx in ``errors.py``."""
    return model.model_validate(request.args.to_dict())


def respond(model: type[BaseModel], data: object, status: int = 200) -> Response:
    """Serialize ``data`` through the response ``model`` the route documents.

    ``data`` is a dict, an instance of ``model``, or an object whose attributes the model reads
    (a core dataclass: ``from_attributes``). What leaves is what the OpenAPI description says: a
    field the model does not declare, or a value of the wrong type, fails here. Keys the route
    leaves out stay out (``exclude_unset``: the open ``/v1/health`` says only
    ``{"status": "ok"}``).
    """
    validated = model.model_validate(data, from_attributes=True)
    body = validated.model_dump_json(exclude_unset=True)
    return current_app.response_class(body, status=status, mimetype="application/json")
