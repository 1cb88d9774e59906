"""JSON-RPC 2.0 over streamable HTTP, stateless: one POST body in, one JSON answer out.

The server keeps nothing between requests (no ``Mcp-Session-Id`` is issued, so clients send
none), so any API node answers any request, ``initialize`` included. Messages are parsed and
results serialized with the official SDK's types (``mcp_types``): ``parse_client_request``
checks a request against the wire schema of its protocol version, ``serialize_server_result``
writes a result in that version's shape.

Versions: 2025-03-26, 2025-06-18 and 2025-11-25 (the handshake era: ``initialize``, then
requests that carry ``MCP-Protocol-Version``; a request without the header is 2025-03-26, as
the specification says). ``server/discover``, the 2026-07-28 probe that discourse-ai and the
SDK's own client send first, is answered as every server of the handshake era answers it:
JSON-RPC "method not found" (-32601) with HTTP 200, on which both fall back to ``initialize``.

HTTP statuses: 200 with the answer (a JSON-RPC error of a well-formed request included); 202
with no body when the POST held only notifications or responses; 400 when the body is not JSON
(-32700), not a JSON-RPC message (-32600), or names a protocol version this server does not
speak (-32022, with the versions it does).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import mcp_types as types
from mcp_types import methods
from mcp_types.version import is_version_at_least
from pydantic import ValidationError

from sidecar import __version__
from sidecar.mcp.toolbox import McpResources, ToolBox, ToolCall, UnknownTool
from sidecar.mcp.tools import instructions
from sidecar.related.service import RelatedService

SUPPORTED_VERSIONS = ("2025-03-26", "2025-06-18", "2025-11-25")
LATEST_VERSION = SUPPORTED_VERSIONS[-1]
# A request without MCP-Protocol-Version is of this version (the 2025-06-18 transport's rule).
DEFAULT_VERSION = types.DEFAULT_NEGOTIATED_VERSION
# The methods this server answers; any other is "method not found", whatever its version.
REQUESTS = frozenset({"initialize", "ping", "tools/list", "tools/call"})
# structuredContent (a tool's result as JSON) exists from this version on.
STRUCTURED_SINCE = "2025-06-18"


@dataclass(frozen=True)
class HttpReply:
    """What the route answers: a status, a JSON body (None: no body), the tool calls made."""

    status: int
    body: dict[str, Any] | list[dict[str, Any]] | None
    calls: list[ToolCall] = field(default_factory=list)


class _Refused(Exception):
    """A message answered with a JSON-RPC error (and, alone in the body, this HTTP status)."""

    def __init__(self, code: int, message: str, status: int = 200, data: Any = None) -> None:
        super().__init__(message)
        self.error = types.ErrorData(code=code, message=message, data=data)
        self.status = status


def error_body(request_id: types.RequestId | None, code: int, message: str,
               data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error message (``request_id`` None: the id could not be read)."""
    error = types.JSONRPCError(jsonrpc="2.0", id=request_id,
                               error=types.ErrorData(code=code, message=message, data=data))
    body: dict[str, Any] = error.model_dump(mode="json", exclude_none=True)
    body["id"] = request_id  # JSON-RPC wants "id": null when it could not be read
    return body


class McpServer:
    """The protocol over a :class:`ToolBox`: ``initialize``, ``ping``, ``tools/list``,
    ``tools/call``."""

    def __init__(self, toolbox: ToolBox, info: types.Implementation, instructions: str) -> None:
        self.toolbox = toolbox
        self.info = info
        self.instructions = instructions

    def handle(self, body: bytes, version_header: str | None) -> HttpReply:
        """Answer one POST: a message, or a batch of them (2025-03-26)."""
        try:
            payload = json.loads(body)
        except ValueError:
            return HttpReply(400, error_body(None, types.PARSE_ERROR,
                                             "parse error: the body is not JSON"))
        calls: list[ToolCall] = []
        if not isinstance(payload, list):
            status, answer = self._one(payload, version_header, calls)
            return HttpReply(status if answer is not None else 202, answer, calls)
        if not payload:
            return HttpReply(400, error_body(None, types.INVALID_REQUEST,
                                             "invalid request: an empty batch"))
        answers = [answer for _, answer in (self._one(item, version_header, calls)
                                            for item in payload) if answer is not None]
        return HttpReply(200 if answers else 202, answers or None, calls)

    def _one(self, message: Any, version_header: str | None,
             calls: list[ToolCall]) -> tuple[int, dict[str, Any] | None]:
        """One message: (status, JSON-RPC answer), None for a notification or a response."""
        if not isinstance(message, Mapping) or not isinstance(message.get("method"), str):
            if isinstance(message, Mapping) and ("result" in message or "error" in message):
                return 202, None  # a response: this server never asks, so nothing awaits it
            return 400, error_body(None, types.INVALID_REQUEST,
                                   "invalid request: not a JSON-RPC 2.0 message")
        if "id" not in message:
            try:
                types.JSONRPCNotification.model_validate(message)
            except ValidationError:
                return 400, error_body(None, types.INVALID_REQUEST,
                                       "invalid request: not a JSON-RPC 2.0 notification")
            return 202, None  # notifications/initialized, cancelled...: nothing to keep
        try:
            request = types.JSONRPCRequest.model_validate(message)
        except ValidationError:
            return 400, error_body(None, types.INVALID_REQUEST,
                                   "invalid request: not a JSON-RPC 2.0 request")
        try:
            result = self._dispatch(request, version_header, calls)
        except _Refused as refused:
            error = refused.error
            return refused.status, error_body(request.id, error.code, error.message, error.data)
        answer = types.JSONRPCResponse(jsonrpc="2.0", id=request.id, result=result)
        return 200, answer.model_dump(mode="json")

    def _dispatch(self, request: types.JSONRPCRequest, version_header: str | None,
                  calls: list[ToolCall]) -> dict[str, Any]:
        method = request.method
        if method not in REQUESTS:
            raise _Refused(types.METHOD_NOT_FOUND, f"method not found: {method}")
        version = self._version(method, request.params, version_header)
        try:
            parsed = methods.parse_client_request(method, version, request.params)
        except KeyError:
            raise _Refused(types.METHOD_NOT_FOUND,
                           f"method not found in protocol {version}: {method}") from None
        except ValidationError as exc:
            raise _Refused(types.INVALID_PARAMS, f"invalid params: {_problems(exc)}") from None
        if isinstance(parsed, types.InitializeRequest):
            result: types.Result = types.InitializeResult(
                protocol_version=version,
                capabilities=types.ServerCapabilities(
                    tools=types.ToolsCapability(list_changed=False)),
                server_info=self.info, instructions=self.instructions)
        elif isinstance(parsed, types.ListToolsRequest):
            result = types.ListToolsResult(tools=self.toolbox.definitions())
        elif isinstance(parsed, types.CallToolRequest):
            try:
                call = self.toolbox.call(
                    parsed.params.name, parsed.params.arguments,
                    structured=is_version_at_least(version, STRUCTURED_SINCE))
            except UnknownTool as exc:
                raise _Refused(types.INVALID_PARAMS, str(exc)) from None
            calls.append(call)
            result = call.result
        else:  # ping
            result = types.EmptyResult()
        data = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return methods.serialize_server_result(method, version, data)

    @staticmethod
    def _version(method: str, params: dict[str, Any] | None, header: str | None) -> str:
        """The protocol version a request is read and answered in.

        ``initialize`` negotiates: the client's version when this server speaks it, else the
        latest it speaks (the client then goes on or hangs up). Any other request is of the
        version its header names; one this server does not speak is refused (400, -32022).
        """
        if method == "initialize":
            offered = (params or {}).get("protocolVersion")
            return offered if offered in SUPPORTED_VERSIONS else LATEST_VERSION
        if header is None:
            return DEFAULT_VERSION
        if header not in SUPPORTED_VERSIONS:
            data = types.UnsupportedProtocolVersionErrorData(
                supported=list(SUPPORTED_VERSIONS), requested=header)
            raise _Refused(types.UNSUPPORTED_PROTOCOL_VERSION,
                           f"unsupported MCP-Protocol-Version {header!r}: this server speaks "
                           f"{', '.join(SUPPORTED_VERSIONS)}", status=400,
                           data=data.model_dump(mode="json"))
        return header


def _problems(exc: ValidationError) -> str:
    return "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}"
                     for err in exc.errors(include_url=False, include_input=False))


def build_server(res: McpResources, related: RelatedService) -> McpServer:
    """The server of a process: its tools over ``res``, named as the sidecar."""
    info = types.Implementation(name="forum-rag-sidecar", title="Forum RAG sidecar",
                                version=__version__)
    return McpServer(ToolBox(res, related), info,
                     instructions(res.settings.forum_url, answer=res.llm_configured))
