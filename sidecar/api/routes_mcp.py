"""`POST /mcp`: the MCP endpoint (JSON-RPC 2.0 over streamable HTTP, stateless; docs/mcp.md).

The API key is checked by the app's guard as on every /v1 route (``Authorization: Bearer``, the
wrong-key throttle included); what the guard, the body limit or the NUL check refuse here is
answered with the same HTTP status and a JSON-RPC error body, whose message MCP clients show.
``GET`` (a stream for server-initiated messages) and ``DELETE`` (the end of a session) are
405: this server sends nothing unasked and keeps no session.
"""

from __future__ import annotations

import json
import threading
from typing import Any
from urllib.parse import urlsplit

from flask import Blueprint, Response, current_app, request
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import RequestEntityTooLarge

from sidecar.api import routes_related
from sidecar.api.context import get_metrics, get_resources
from sidecar.api.errors import request_id
from sidecar.api.metrics import Metrics
from sidecar.api.routes_answer import observe_answer
from sidecar.api.routes_retrieve import observe as observe_retrieval
from sidecar.errors import BadRequest, SidecarError, TooManyRequests, Unauthorized
from sidecar.mcp.protocol import McpServer, build_server, error_body
from sidecar.mcp.toolbox import ToolCall

bp = Blueprint("mcp", __name__)

_SERVER = "sidecar_mcp"
_LOCK = threading.Lock()
# The JSON-RPC code of a request the HTTP layer refused (no or a wrong key, too many wrong
# keys, a body too large, a forbidden Origin): one of the implementation-defined codes
# (-32000 to -32019); the error's data names the HTTP status and the sidecar's error code.
REFUSED = -32010
VERSION_HEADER = "MCP-Protocol-Version"


def server() -> McpServer:
    """The app's MCP server, built on first use from its resources."""
    built: McpServer | None = current_app.extensions.get(_SERVER)
    if built is None:
        with _LOCK:
            built = current_app.extensions.get(_SERVER)
            if built is None:
                related, _ = routes_related.services()  # one related cache per app
                built = build_server(get_resources(), related)
                current_app.extensions[_SERVER] = built
    return built


def origin_allowed(origin: str | None, forum_url: str) -> bool:
    """No Origin (a server or a desktop client), or the forum's own: the specification asks
    servers to refuse other origins (DNS rebinding; a browser page would also need the key)."""
    if origin is None:
        return True
    if not forum_url:
        return False
    forum = urlsplit(forum_url)
    return origin.rstrip("/").lower() == f"{forum.scheme}://{forum.netloc}".lower()


@bp.post("/mcp")
def mcp() -> ResponseReturnValue:
    """Answer one POST of JSON-RPC messages."""
    res = get_resources()
    if not origin_allowed(request.headers.get("Origin"), res.settings.forum_url):
        return _refused(403, "forbidden", "this Origin may not call the MCP endpoint")
    reply = server().handle(request.get_data(cache=True), request.headers.get(VERSION_HEADER))
    observe(get_metrics(), reply.calls)
    if reply.body is None:
        return Response(status=202)
    return current_app.response_class(json.dumps(reply.body), status=reply.status,
                                      mimetype="application/json")


@bp.route("/mcp", methods=["GET", "DELETE"])
def mcp_stream() -> ResponseReturnValue:
    """405: no stream of server-initiated messages, no session to end."""
    response = _refused(405, "method_not_allowed",
                        "this MCP server is stateless: POST JSON-RPC messages to /mcp")
    response.headers["Allow"] = "POST"
    return response


def observe(metrics: Metrics, calls: list[ToolCall]) -> None:
    """Count the tool calls of one POST, and what their services did (as their routes do)."""
    for call in calls:
        metrics.mcp_tool_calls.labels(call.tool, call.outcome).inc()
        for trace in call.traces:
            metrics.observe_trace(trace)
        if call.retrieval is not None:
            observe_retrieval(metrics, call.retrieval)
        if call.answer is not None:
            observe_answer(metrics, call.answer)


# What the app's guard and checks refuse before the view runs (no or a wrong key, too many
# wrong keys, a NUL character, a body over SIDECAR_MAX_REQUEST_BYTES), as JSON-RPC; anything
# else keeps the app's handlers.
@bp.errorhandler(Unauthorized)
@bp.errorhandler(TooManyRequests)
@bp.errorhandler(BadRequest)
def _guard_error(exc: SidecarError) -> ResponseReturnValue:
    return _refused(exc.status, exc.code, exc.message)


@bp.errorhandler(RequestEntityTooLarge)
def _too_large(exc: RequestEntityTooLarge) -> ResponseReturnValue:
    return _refused(413, "request_entity_too_large", exc.description or "the body is too large")


def _refused(status: int, code: str, message: str) -> Response:
    data: dict[str, Any] = {"status": status, "code": code, "request_id": request_id()}
    return current_app.response_class(json.dumps(error_body(None, REFUSED, message, data)),
                                      status=status, mimetype="application/json")
