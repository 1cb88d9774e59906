"""Fixtures of the MCP tests: the demo forum in a database of our own (``retrieve`` stores its
retrievals), the sidecar's app over it, and that app served over real HTTP on a free port."""

from __future__ import annotations

import dataclasses
import json
import re
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from models.host import ThreadedHost
from sidecar.runtime.bootstrap import demo_dir
from tests.conftest import API_KEY, demo_forum

AUTH = {"Authorization": f"Bearer {API_KEY}"}
# What discourse-ai's MCP client sends with every POST (lib/mcp/client.rb, default_headers).
CLIENT_HEADERS = {"Content-Type": "application/json",
                  "Accept": "application/json, text/event-stream",
                  "User-Agent": "Discourse AI MCP Client", **AUTH}
# The demo's topics that are not public: a private message, two in a staff category, an
# unlisted one, a deleted one, one in a read-restricted category.
PRIVATE_TOPICS = (10, 19, 22, 31, 35, 38)
# Every canary the demo hides in private content (tests/data/demo_private_probes.json asks for
# them by name).
CANARIES = sorted(set(re.findall(r"CANARY[A-Z]+[0-9]+",
                                 (demo_dir() / "posts.jsonl").read_text(encoding="utf-8"))))
POST_LINK = re.compile(r"https://forum\.example\.org/t/[a-z0-9-]+/\d+/\d+")


@pytest.fixture(scope="session")
def mcp_state(tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str, redis_url: str,
              minilm: Any) -> Iterator[Any]:
    """The demo forum imported and embedded with MiniLM (we write retrievals)."""
    with demo_forum(pg_admin_url, redis_url, tmp_path_factory.mktemp("mcp"), minilm,
                    prefix="t_mcp") as res:
        yield res


def fresh(res: Any, **settings: Any) -> Any:
    """The same resources with their own Redis namespace (wrong-key counts, caches) and
    ``settings``."""
    values = {"queue_prefix": f"t{uuid.uuid4().hex[:10]}", **settings}
    return dataclasses.replace(res, settings=res.settings.model_copy(update=values))


@pytest.fixture(scope="session")
def mcp_app(mcp_state: Any) -> Any:
    """The sidecar's app over the demo."""
    from sidecar.api.app import create_app

    return create_app(mcp_state.settings, mcp_state)


@pytest.fixture
def client(mcp_app: Any) -> Any:
    """A test client of the app."""
    return mcp_app.test_client()


@pytest.fixture(scope="session")
def mcp_url(mcp_app: Any) -> Iterator[str]:
    """The app served over HTTP on a free local port; the MCP endpoint's URL."""
    with ThreadedHost(mcp_app) as host:
        yield f"{host.url}/mcp"


def rpc(client: Any, method: str, params: dict[str, Any] | None = None, *,
        version: str | None = "2025-11-25", request_id: Any = 1,
        headers: dict[str, str] | None = None) -> Any:
    """POST one JSON-RPC request to /mcp through a test client; the response."""
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        message["params"] = params
    sent = {**CLIENT_HEADERS, **(headers or {})}
    if version is not None:
        sent["MCP-Protocol-Version"] = version
    return client.post("/mcp", data=json.dumps(message), headers=sent)


def call_tool(client: Any, name: str, arguments: dict[str, Any], *,
              version: str = "2025-11-25") -> dict[str, Any]:
    """``tools/call``; its result (the call must be answered 200 with a result)."""
    resp = rpc(client, "tools/call", {"name": name, "arguments": arguments}, version=version)
    assert resp.status_code == 200, resp.get_data(as_text=True)
    body = resp.json
    assert "result" in body, body
    result: dict[str, Any] = body["result"]
    return result


def text_of(result: dict[str, Any]) -> str:
    """The text content of a tool result (what discourse-ai hands its LLM)."""
    return "\n".join(block["text"] for block in result["content"] if block["type"] == "text")
