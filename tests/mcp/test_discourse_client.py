"""/mcp as discourse-ai's MCP client talks to it (plugins/discourse-ai/lib/mcp/client.rb, read
2026-12: ../shared/reference/discourse.md §11), over real HTTP.

The client probes ``server/discover`` at 2026-07-28 first; it falls back to the classic
handshake when the answer is HTTP 400, or a JSON-RPC "method not found" (-32601) with HTTP 200,
404 or 405 (``classic_fallback?``); it then sends ``initialize`` at 2025-11-25 (2025-03-26 when
that version is refused), ``notifications/initialized``, ``tools/list`` and ``tools/call``, each
with its headers, and reads a JSON body (an SSE one too, not used here). It sends the session id
only if the server gave one; this server gives none.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from tests.mcp.conftest import CANARIES, CLIENT_HEADERS, POST_LINK, text_of

MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientInfo": {"name": "Discourse AI MCP Client",
                                               "version": "2026.12.0"},
        "io.modelcontextprotocol/clientCapabilities": {}}


class DiscourseAiClient:
    """The requests and decisions of discourse-ai's client, one by one."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.http = httpx.Client(timeout=60)
        self.url = url
        self.headers = headers
        self.protocol_version: str | None = None
        self.session_id: str | None = None
        self.log: list[tuple[str, int]] = []

    def post(self, method: str, params: dict[str, Any] | None = None, *,
             notification: bool = False) -> httpx.Response:
        payload: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if self.protocol_version == MODERN:
            params = {**(params or {}), "_meta": META}
        if params:
            payload["params"] = params
        if not notification:
            payload["id"] = str(uuid.uuid4())
        headers = dict(self.headers)
        if self.protocol_version:
            headers["MCP-Protocol-Version"] = self.protocol_version
        if self.protocol_version == MODERN:
            headers["Mcp-Method"] = method  # HeaderMapper.request_headers (2026 only)
        if self.session_id and self.protocol_version != MODERN:
            headers["Mcp-Session-Id"] = self.session_id
        response = self.http.post(self.url, json=payload, headers=headers)
        self.log.append((method, response.status_code))
        return response

    @staticmethod
    def classic_fallback(response: httpx.Response) -> bool:
        # client.rb, classic_fallback? and method_not_found?
        try:
            payload = response.json()
        except ValueError:
            payload = None
        not_found = (isinstance(payload, dict) and payload.get("jsonrpc") == "2.0"
                     and isinstance(payload.get("error"), dict)
                     and payload["error"].get("code") == -32601)
        if response.status_code == 400:
            return True
        if response.status_code == 200:
            return not_found
        if response.status_code not in (404, 405):
            return False
        return not_found or not isinstance(payload, dict) or payload.get("jsonrpc") != "2.0"

    def initialize_session(self) -> dict[str, Any]:
        self.protocol_version = MODERN
        probe = self.post("server/discover")
        error = (probe.json() or {}).get("error") if probe.content else None
        assert not (isinstance(error, dict) and error.get("code") in (-32020, -32021, -32022)), \
            "a modern error: the client would stop or re-probe instead of falling back"
        assert self.classic_fallback(probe), (probe.status_code, probe.text)
        return self.initialize_classic("2025-11-25")

    def initialize_classic(self, offer: str) -> dict[str, Any]:
        self.protocol_version = None
        response = self.post("initialize", {
            "protocolVersion": offer, "capabilities": {"tools": {}},
            "clientInfo": {"name": "Discourse AI MCP Client", "version": "2026.12.0"}})
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()["result"]
        assert result["protocolVersion"] in ("2025-11-25", "2025-03-26")
        self.protocol_version = result["protocolVersion"]
        self.session_id = response.headers.get("Mcp-Session-Id")
        notified = self.post("notifications/initialized", notification=True)
        assert notified.status_code == 202 and notified.content == b""
        return result

    def list_tools(self) -> list[dict[str, Any]]:
        response = self.post("tools/list")
        assert response.status_code == 200, response.text
        tools: list[dict[str, Any]] = response.json()["result"]["tools"]
        return tools

    def call_tool(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        response = self.post("tools/call", {"name": name, "arguments": arguments})
        assert response.status_code == 200, response.text
        assert response.headers["Content-Type"].startswith("application/json")
        result: dict[str, Any] = response.json()["result"]
        return result


def test_discourse_ai_falls_back_initializes_lists_and_calls(mcp_url: str) -> None:
    client = DiscourseAiClient(mcp_url, CLIENT_HEADERS)
    result = client.initialize_session()
    assert result["protocolVersion"] == "2025-11-25"
    assert result["capabilities"]["tools"] == {"listChanged": False}
    assert result["serverInfo"]["name"] == "forum-rag-sidecar"
    assert "search" in result["instructions"]
    assert client.session_id is None  # stateless: any API node answers the next request

    tools = {tool["name"]: tool for tool in client.list_tools()}
    assert set(tools) == {"search", "retrieve", "related"}
    for tool in tools.values():
        schema = tool["inputSchema"]
        assert schema["type"] == "object" and schema["required"]
        assert "$ref" not in str(schema) and "anyOf" not in str(schema)
        assert len(tool["description"]) <= 1000  # discourse-ai's limit on a tool description

    found = client.call_tool("search", {"query": "WireGuard tunnel to a VPS behind CGNAT"})
    assert found["isError"] is False
    text = text_of(found)
    assert POST_LINK.search(text), text
    assert "/t/" in found["structuredContent"]["results"][0]["url"]
    assert not any(canary in text for canary in CANARIES)

    assert client.log == [("server/discover", 200), ("initialize", 200),
                          ("notifications/initialized", 202), ("tools/list", 200),
                          ("tools/call", 200)]


def test_the_probe_is_method_not_found_whatever_its_headers(mcp_url: str) -> None:
    # The probe carries the 2026 version this server does not speak: still "method not found"
    # (a -32022 would be read by discourse-ai as a modern server refusing it).
    probe = httpx.post(mcp_url, headers={**CLIENT_HEADERS, "MCP-Protocol-Version": MODERN},
                       json={"jsonrpc": "2.0", "id": "p1", "method": "server/discover",
                             "params": {"_meta": META}})
    assert probe.status_code == 200
    assert probe.json() == {"jsonrpc": "2.0", "id": "p1",
                            "error": {"code": -32601,
                                      "message": "method not found: server/discover"}}


def test_an_older_offer_is_answered_in_its_version(mcp_url: str) -> None:
    client = DiscourseAiClient(mcp_url, CLIENT_HEADERS)
    result = client.initialize_classic("2025-03-26")
    assert result["protocolVersion"] == "2025-03-26"
    found = client.call_tool("search", {"query": "ZFS scrub"})
    assert POST_LINK.search(text_of(found))
    assert "structuredContent" not in found  # it came with 2025-06-18


def test_a_tool_error_reaches_the_agent_as_a_result(mcp_url: str) -> None:
    client = DiscourseAiClient(mcp_url, CLIENT_HEADERS)
    client.initialize_session()
    result = client.call_tool("related", {"topic_id": 10})  # a private message
    assert result["isError"] is True
    assert text_of(result) == "no public topic with this id"


def test_without_the_key_the_client_gets_401_and_a_message(mcp_url: str) -> None:
    headers = {k: v for k, v in CLIENT_HEADERS.items() if k != "Authorization"}
    client = DiscourseAiClient(mcp_url, headers)
    client.protocol_version = MODERN
    probe = client.post("server/discover")
    # Not a status the probe tolerates (400, 404, 405): the client raises error.message.
    assert probe.status_code == 401
    body = probe.json()
    assert body["error"]["message"].startswith("missing bearer token")
    assert body["error"]["data"]["status"] == 401
