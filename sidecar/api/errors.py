"""Domain errors, validation errors and HTTP errors become JSON here, and only here.

Every response carries ``X-Request-Id`` (the proxy's, when it sent a well-formed one, else a new
one). A server-side error (5xx) is logged with that id, the client address and every internal
detail (a driver's message names host, port and user); its body says what failed in words meant
for a client and names the ``request_id``, never the detail.
"""

from __future__ import annotations

import logging
import re
import uuid
from typing import Any

from flask import Flask, Response, g, request
from flask.typing import ResponseReturnValue
from pydantic import ValidationError
from werkzeug.exceptions import HTTPException

from models.errors import ModelError, ModelInputError
from sidecar.api.context import respond
from sidecar.api.schemas import ErrorResponse
from sidecar.errors import SidecarError, TooManyRequests

log = logging.getLogger(__name__)

REQUEST_ID_HEADER = "X-Request-Id"
_INBOUND_ID = re.compile(r"^[A-Za-z0-9._:-]{8,64}$")  # nothing that could forge a log line


def request_id() -> str:
    """This request's id: the one a proxy in front sent, if it looks like one, else a new one."""
    rid: str | None = g.get("request_id")
    if rid is None:
        inbound = request.headers.get(REQUEST_ID_HEADER, "")
        rid = inbound if _INBOUND_ID.match(inbound) else uuid.uuid4().hex
        g.request_id = rid
    return rid


def _body(code: str, message: str, details: Any = None) -> dict[str, Any]:
    body: dict[str, Any] = {"error": {"code": code, "message": message}}
    if details is not None:
        body["error"]["details"] = details
    return body


def _server_error(status: int, body: dict[str, Any], detail: str,
                  exc_info: BaseException | None = None) -> ResponseReturnValue:
    rid = request_id()
    log.error("request %s from %s %s %s failed (%d): %s", rid, request.remote_addr,
              request.method, request.path, status, detail, exc_info=exc_info)
    body["error"]["request_id"] = rid
    return _error(body, status)


def _error(body: dict[str, Any], status: int) -> Response:
    # Through the model every route documents its errors with (see openapi.py).
    return respond(ErrorResponse, body, status)


def validation_details(exc: ValidationError) -> list[dict[str, Any]]:
    """Pydantic's errors without the offending input (it may be huge or sensitive)."""
    return [
        {"loc": ".".join(str(p) for p in err["loc"]) or "body", "msg": err["msg"],
         "type": err["type"]}
        for err in exc.errors(include_url=False, include_input=False, include_context=False)
    ]


def register_error_handlers(app: Flask) -> None:
    """Install the JSON error handlers, and the request id on every response."""

    @app.after_request
    def _tag(response: Response) -> Response:
        response.headers[REQUEST_ID_HEADER] = request_id()
        return response

    @app.errorhandler(SidecarError)
    def _domain(exc: SidecarError) -> ResponseReturnValue:
        body = _body(exc.code, exc.message, exc.details)
        if exc.status >= 500:
            return _server_error(exc.status, body, f"{exc.code}: {exc}")
        response = _error(body, exc.status)
        if isinstance(exc, TooManyRequests) and exc.retry_after_s is not None:
            response.headers["Retry-After"] = str(max(1, exc.retry_after_s))
        return response

    @app.errorhandler(ValidationError)
    def _validation(exc: ValidationError) -> ResponseReturnValue:
        details = validation_details(exc)
        if any(d["type"] == "json_invalid" for d in details):
            return _error(_body("bad_request", "the request body is not valid JSON",
                                details), 400)
        if any(d["type"] == "model_type" for d in details if d["loc"] == "body"):
            return _error(_body("invalid_input", "the request body must be a JSON object",
                                details), 422)
        return _error(_body("invalid_input", "the request does not match the schema",
                            details), 422)

    @app.errorhandler(ModelError)
    def _model(exc: ModelError) -> ResponseReturnValue:
        # A remote model host that is down, slow or refusing (see models.client).
        if isinstance(exc, ModelInputError):
            return _error(_body("invalid_input", getattr(exc, "detail", str(exc))), 422)
        return _server_error(503, _body("service_unavailable",
                                        "the model is unavailable right now"),
                             f"model failure: {exc}")

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException) -> ResponseReturnValue:
        code = (exc.name or "error").lower().replace(" ", "_")
        status = exc.code or 500
        body = _body(code, exc.description or exc.name or "error")
        if status >= 500:
            return _server_error(status, body, f"{code}: {exc.description}")
        return _error(body, status)

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception) -> ResponseReturnValue:
        return _server_error(500, _body("internal_error", "internal error: the sidecar's log "
                                                          "has the detail under request_id"),
                             f"unhandled {type(exc).__name__}", exc_info=exc)
