"""/mcp's JSON-RPC: versions, malformed messages, batches, notifications, statuses, the key.

A malformed message is a JSON-RPC error (parse -32700, invalid request -32600, method not found
-32601, invalid params -32602), never a 500; what the HTTP layer refuses (no or a wrong key, too
many wrong keys, a foreign Origin, a body too large) keeps its status and says why in a JSON-RPC
error body, which MCP clients show.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from sidecar.api.app import create_app
from tests.conftest import API_KEY
from tests.mcp.conftest import AUTH, CLIENT_HEADERS, POST_LINK, fresh, rpc


def post_raw(client: Any, data: bytes | str, headers: dict[str, str] | None = None) -> Any:
    return client.post("/mcp", data=data, headers={**CLIENT_HEADERS, **(headers or {})})


@pytest.mark.parametrize("offered,answered", [
    ("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"), ("2025-03-26", "2025-03-26"),
    ("2024-11-05", "2025-11-25"), ("2026-07-28", "2025-11-25"), ("someday", "2025-11-25"),
])
def test_initialize_answers_the_offer_or_its_latest_version(client: Any, offered: str,
                                                            answered: str) -> None:
    resp = rpc(client, "initialize", {"protocolVersion": offered, "capabilities": {},
                                      "clientInfo": {"name": "t", "version": "1"}},
               version=None)
    assert resp.status_code == 200
    result = resp.json["result"]
    assert result["protocolVersion"] == answered
    assert set(result) == {"protocolVersion", "capabilities", "serverInfo", "instructions"}
    assert "Mcp-Session-Id" not in resp.headers


def test_a_request_in_a_version_not_spoken_is_400_with_the_versions_spoken(client: Any) -> None:
    resp = rpc(client, "tools/list", version="2026-07-28", request_id="a")
    assert resp.status_code == 400
    assert resp.json["id"] == "a"
    error = resp.json["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": ["2025-03-26", "2025-06-18", "2025-11-25"],
                             "requested": "2026-07-28"}


def test_requests_need_no_initialize_and_no_session(client: Any) -> None:
    # Stateless: a node that never saw this client's initialize answers its next request.
    for version in (None, "2025-03-26", "2025-11-25"):
        resp = rpc(client, "tools/list", version=version, request_id=7)
        assert resp.status_code == 200
        assert resp.json["id"] == 7
        assert [t["name"] for t in resp.json["result"]["tools"]] == [
            "search", "retrieve", "related"]
    assert rpc(client, "ping").json == {"jsonrpc": "2.0", "id": 1, "result": {}}


@pytest.mark.parametrize("body,code", [
    (b"{not json", -32700),
    (b"", -32700),
    (b"[]", -32600),
    (b'"tools/list"', -32600),
    (b'{"jsonrpc": "2.0", "id": 1}', -32600),
    (b'{"jsonrpc": "1.0", "id": 1, "method": "ping"}', -32600),
    (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', -32600),
    (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', -32600),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": [1]}', -32600),
    (b'{"jsonrpc": "2.0", "method": 7}', -32600),
])
def test_a_malformed_message_is_400_with_a_json_rpc_error(client: Any, body: bytes,
                                                          code: int) -> None:
    resp = post_raw(client, body)
    assert resp.status_code == 400
    assert resp.json["jsonrpc"] == "2.0" and resp.json["id"] is None
    assert resp.json["error"]["code"] == code


@pytest.mark.parametrize("method,params,code,message", [
    ("resources/list", None, -32601, "method not found: resources/list"),
    ("server/discover", None, -32601, "method not found: server/discover"),
    ("tools/call", {"arguments": {}}, -32602, "invalid params: params.name: Field required"),
    ("tools/call", {"name": "delete_forum", "arguments": {}}, -32602,
     "unknown tool: 'delete_forum'; the tools are related, retrieve, search"),
    ("initialize", {"protocolVersion": "2025-11-25"}, -32602, "invalid params"),
])
def test_a_wrong_method_or_params_is_a_json_rpc_error_with_the_request_id(
        client: Any, method: str, params: dict[str, Any] | None, code: int,
        message: str) -> None:
    resp = rpc(client, method, params, request_id="r-9")
    assert resp.status_code == 200
    assert resp.json["id"] == "r-9"
    assert resp.json["error"]["code"] == code
    assert resp.json["error"]["message"].startswith(message)


def test_notifications_and_responses_are_accepted_without_a_body(client: Any) -> None:
    for message in ({"jsonrpc": "2.0", "method": "notifications/initialized"},
                    {"jsonrpc": "2.0", "method": "notifications/cancelled",
                     "params": {"requestId": 3}},
                    {"jsonrpc": "2.0", "id": 4, "result": {}}):
        resp = post_raw(client, json.dumps(message))
        assert resp.status_code == 202 and resp.get_data() == b""


def test_a_batch_is_answered_in_one_array(client: Any) -> None:
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "ping"},
             {"jsonrpc": "2.0", "method": "notifications/initialized"},
             {"jsonrpc": "2.0", "id": 2, "method": "nope"},
             {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
              "params": {"name": "related", "arguments": {"topic_id": 9, "limit": 2}}}]
    resp = post_raw(client, json.dumps(batch))
    assert resp.status_code == 200
    by_id = {answer["id"]: answer for answer in resp.json}
    assert set(by_id) == {1, 2, 3}
    assert by_id[1]["result"] == {}
    assert by_id[2]["error"]["code"] == -32601
    # No MCP-Protocol-Version: 2025-03-26 (batches are of that version), no structuredContent.
    assert "structuredContent" not in by_id[3]["result"]
    assert len(POST_LINK.findall(by_id[3]["result"]["content"][0]["text"])) == 2
    only_notifications = [{"jsonrpc": "2.0", "method": "notifications/initialized"}]
    assert post_raw(client, json.dumps(only_notifications)).status_code == 202


def test_get_and_delete_are_405(client: Any) -> None:
    for method in ("GET", "DELETE"):
        resp = client.open("/mcp", method=method, headers={**AUTH,
                                                          "Accept": "text/event-stream"})
        assert resp.status_code == 405
        assert resp.headers["Allow"] == "POST"
        assert resp.json["error"]["data"]["status"] == 405


def test_the_key_is_checked_and_a_refusal_is_json_rpc(mcp_state: Any) -> None:
    res = fresh(mcp_state)  # its own wrong-key counts
    client = create_app(res.settings, res).test_client()
    no_key = {k: v for k, v in CLIENT_HEADERS.items() if k != "Authorization"}
    for headers, message in ((no_key, "missing bearer token"),
                             ({**no_key, "Authorization": "Bearer wrong-key"}, "invalid API key"),
                             ({**no_key, "Authorization": API_KEY}, "missing bearer token")):
        resp = client.post("/mcp", data=json.dumps({"jsonrpc": "2.0", "id": 1,
                                                    "method": "tools/list"}), headers=headers)
        assert resp.status_code == 401
        assert resp.json["jsonrpc"] == "2.0" and resp.json["id"] is None
        error = resp.json["error"]
        assert error["message"].startswith(message)
        assert error["data"]["status"] == 401 and error["data"]["code"] == "unauthorized"
        assert error["data"]["request_id"] == resp.headers["X-Request-Id"]
        assert "result" not in resp.json


def test_wrong_keys_are_throttled_as_on_the_v1_routes(mcp_state: Any) -> None:
    res = fresh(mcp_state)  # its own wrong-key counts
    app = create_app(res.settings, res)
    client = app.test_client()
    client.environ_base["REMOTE_ADDR"] = "192.0.2.77"
    wrong = {**CLIENT_HEADERS, "Authorization": "Bearer wrong-key"}
    statuses = [rpc(client, "ping", headers=wrong).status_code for _ in range(11)]
    assert statuses == [401] * 10 + [429]  # MAX_FAILURES wrong keys, then refused unseen
    resp = rpc(client, "ping")  # the right key too, until the window ends
    assert resp.status_code == 429 and resp.json["error"]["data"]["code"] == "too_many_requests"
    other = app.test_client()
    other.environ_base["REMOTE_ADDR"] = "192.0.2.78"
    assert rpc(other, "ping").status_code == 200


def test_only_the_forums_origin_may_call_from_a_browser(client: Any) -> None:
    assert rpc(client, "ping", headers={"Origin": "https://evil.example"}).status_code == 403
    assert rpc(client, "ping", headers={"Origin": "https://forum.example.org"}).json[
        "result"] == {}


def test_a_body_over_the_limit_is_413(mcp_state: Any) -> None:
    res = fresh(mcp_state, max_request_bytes=2048)
    app = create_app(res.settings, res)
    resp = rpc(app.test_client(), "tools/call",
               {"name": "search", "arguments": {"query": "x" * 4096}})
    assert resp.status_code == 413
    assert resp.json["error"]["data"]["status"] == 413
