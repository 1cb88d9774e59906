"""Domain errors, validation errors and HTTP errors become JSON here, and only here."""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, jsonify
from flask.typing import ResponseReturnValue
from pydantic import ValidationError
from werkzeug.exceptions import HTTPException

from models.errors import ModelError, ModelInputError
from sidecar.errors import SidecarError

log = logging.getLogger(__name__)


def _body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"error": {"code": code, "message": message}}
    if details is not None:
        body["error"]["details"] = details
    return body


def validation_details(exc: ValidationError) -> list[dict[str, Any]]:
    """Pydantic's errors without the offending input (it may be huge or sensitive)."""
    return [
        {"loc": ".".join(str(p) for p in err["loc"]) or "body", "msg": err["msg"],
         "type": err["type"]}
        for err in exc.errors(include_url=False, include_input=False, include_context=False)
    ]


def register_error_handlers(app: Flask) -> None:
    """Install the JSON error handlers on the app."""

    @app.errorhandler(SidecarError)
    def _domain(exc: SidecarError) -> ResponseReturnValue:
        if exc.status >= 500:
            log.error("%s: %s", exc.code, exc.message)
        return jsonify(exc.to_dict()), exc.status

    @app.errorhandler(ValidationError)
    def _validation(exc: ValidationError) -> ResponseReturnValue:
        details = validation_details(exc)
        if any(d["type"] == "json_invalid" for d in details):
            return jsonify(_body("bad_request", "the request body is not valid JSON",
                                 details)), 400
        if any(d["type"] == "model_type" for d in details if d["loc"] == "body"):
            return jsonify(_body("invalid_input", "the request body must be a JSON object",
                                 details)), 422
        return jsonify(_body("invalid_input", "the request does not match the schema",
                             details)), 422

    @app.errorhandler(ModelError)
    def _model(exc: ModelError) -> ResponseReturnValue:
        # A remote model host that is down, slow or refusing (see models.client).
        if isinstance(exc, ModelInputError):
            return jsonify(_body("invalid_input", getattr(exc, "detail", str(exc)))), 422
        log.error("model failure: %s", exc)
        return jsonify(_body("service_unavailable",
                             "the model is unavailable right now; see the sidecar's log")), 503

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> ResponseReturnValue:
        code = (exc.name or "error").lower().replace(" ", "_")
        return jsonify(_body(code, exc.description or exc.name or "error")), exc.code or 500

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> ResponseReturnValue:
        log.exception("unhandled error")
        return jsonify(_body("internal_error", "internal error; see the sidecar's log")), 500
