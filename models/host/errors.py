"""Every failure of the model host becomes TEI's error body ``{"error", "error_type"}``, here
(OpenAI's ``{"error": {"message", "type", "param", "code"}}`` on the ``/v1/`` routes).

Statuses follow TEI where TEI defines the case: 413 ``validation`` for too many inputs or an
over-long text with ``truncate=false``, 429 ``overloaded``, 424 ``backend`` for a failed model
call or a model this host does not serve, 503 ``unhealthy``. Request bodies that do not parse
are 400, bodies that do not match the schema (wrong types, unknown fields, empty texts) 422.
"""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, jsonify, request
from flask.typing import ResponseReturnValue
from pydantic import ValidationError
from werkzeug.exceptions import HTTPException

from models.errors import ModelInputError
from models.host.batcher import BatcherClosed, Overloaded

log = logging.getLogger(__name__)


class HostError(Exception):
    """A failure with its HTTP status and TEI ``error_type``."""

    def __init__(self, status: int, error_type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.error_type = error_type
        self.message = message


class ModelCallFailed(HostError):
    """The model itself failed while running a batch (TEI's 424 ``backend``)."""

    def __init__(self, message: str) -> None:
        super().__init__(424, "backend", message)


def invalid(message: str) -> HostError:
    """A request that parses but cannot be served as it is (422)."""
    return HostError(422, "validation", message)


def too_large(message: str) -> HostError:
    """Too many inputs, or a text over the model's limit with ``truncate=false`` (413)."""
    return HostError(413, "validation", message)


def _body(message: str, error_type: str, status: int) -> dict[str, Any]:
    if request.path.startswith("/v1/"):  # the OpenAI-compatible routes answer OpenAI's shape
        kind = "invalid_request_error" if error_type == "validation" else error_type
        return {"error": {"message": message, "type": kind, "param": None, "code": status}}
    return {"error": message, "error_type": error_type}


def _pydantic_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_input=False, include_context=False)[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "body"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def register_error_handlers(app: Flask) -> None:
    """Install the JSON error handlers on the host app."""

    @app.errorhandler(HostError)
    def _host(exc: HostError) -> ResponseReturnValue:
        if exc.status >= 424:
            log.warning("%s (%s): %s", exc.status, exc.error_type, exc.message)
        return jsonify(_body(exc.message, exc.error_type, exc.status)), exc.status

    @app.errorhandler(ValidationError)
    def _validation(exc: ValidationError) -> ResponseReturnValue:
        types = {e["type"] for e in exc.errors(include_url=False)}
        if "json_invalid" in types:
            return jsonify(_body("the request body is not valid JSON", "validation", 400)), 400
        return jsonify(_body(_pydantic_message(exc), "validation", 422)), 422

    @app.errorhandler(ModelInputError)
    def _model_input(exc: ModelInputError) -> ResponseReturnValue:
        return jsonify(_body(str(exc), "validation", 422)), 422

    @app.errorhandler(Overloaded)
    def _overloaded(exc: Overloaded) -> ResponseReturnValue:
        return jsonify(_body(str(exc), "overloaded", 429)), 429

    @app.errorhandler(BatcherClosed)
    def _closed(exc: BatcherClosed) -> ResponseReturnValue:
        return jsonify(_body(str(exc), "unhealthy", 503)), 503

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> ResponseReturnValue:
        status = exc.code or 400
        kind = {401: "unauthorized", 404: "not_found", 405: "method_not_allowed",
                413: "validation"}.get(status, "validation")  # fmt: skip
        return jsonify(_body(exc.description or exc.name or "error", kind, status)), status

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> ResponseReturnValue:
        log.exception("unhandled error in the model host")
        return jsonify(_body("internal error; see the model host's log", "backend", 500)), 500
