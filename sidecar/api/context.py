"""The app's resources and metrics: wired once (``init_app``), reached per request (``get_*``).

As flaskr's ``get_db`` and ``init_app``: the process's one :class:`Resources` (started by the
app factory or handed in by a test) is attached at start-up; routes reach it, and the services
built on it (``res.retrieval()``, ``res.sanitizer()``, ``res.moderation()``...), through
:func:`get_resources`.
"""

from __future__ import annotations

from typing import TypeVar

from flask import Flask, Response, current_app, request
from pydantic import BaseModel

from sidecar.api.metrics import Metrics
from sidecar.api.metrics_state import StateCollector
from sidecar.runtime.resources import Resources

M = TypeVar("M", bound=BaseModel)

_RESOURCES = "sidecar"
_METRICS = "sidecar_metrics"


def init_app(app: Flask, res: Resources) -> None:
    """Attach ``res`` and a fresh set of metrics to ``app`` (the metrics time every request)."""
    app.extensions[_RESOURCES] = res
    metrics = Metrics()
    metrics.add_scraped(StateCollector(lambda: resources_of(app),
                                       ttl_s=res.settings.metrics_state_ttl_s))
    app.extensions[_METRICS] = metrics
    metrics.bind(app)


def resources_of(app: Flask) -> Resources | None:
    """The resources attached to ``app``, if any (outside a request: gunicorn's hooks)."""
    res: Resources | None = app.extensions.get(_RESOURCES)
    return res


def get_resources() -> Resources:
    """The resources attached to the running app at start-up."""
    res: Resources = current_app.extensions[_RESOURCES]
    return res


def get_metrics() -> Metrics:
    """The app's Prometheus metrics."""
    metrics: Metrics = current_app.extensions[_METRICS]
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
