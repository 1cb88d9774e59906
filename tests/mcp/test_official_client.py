"""/mcp through the official MCP SDK's client (the ``mcp`` package), over real HTTP.

``Client`` in its default mode probes ``server/discover`` (2026-07-28), falls back to
``initialize`` on our "method not found", then lists and calls; ``ClientSession`` on the
streamable HTTP transport does the classic handshake alone. Both must see the tools, get
post-level links from ``search``, read a tool error as ``isError``, and fail without the key.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from models.host import ThreadedHost
from sidecar.api.app import create_app
from tests.mcp.conftest import AUTH, CANARIES, POST_LINK, fresh

QUESTION = "How do I scrub a ZFS pool and read its errors?"


def text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if block.type == "text")


def test_the_sdk_client_falls_back_lists_and_searches(mcp_url: str) -> None:
    async def scenario() -> None:
        async with httpx2.AsyncClient(headers=AUTH, timeout=60) as http, \
                Client(streamable_http_client(mcp_url, http_client=http)) as client:
            assert client.protocol_version == "2025-11-25"  # after the probe's fallback
            assert client.server_info is not None
            assert client.server_info.name == "forum-rag-sidecar"
            assert client.server_capabilities.tools is not None
            listed = await client.list_tools()
            assert [t.name for t in listed.tools] == ["search", "retrieve", "related"]
            assert all(t.annotations and t.annotations.read_only_hint for t in listed.tools)

            found = await client.call_tool("search", {"query": QUESTION, "limit": 3})
            assert not found.is_error
            assert len(POST_LINK.findall(text(found))) == 3
            assert [r["url"] for r in found.structured_content["results"]] == \
                POST_LINK.findall(text(found))

            evidence = await client.call_tool("retrieve", {"question": QUESTION})
            assert evidence.structured_content["zone"] in ("normal", "cautious")
            assert POST_LINK.search(text(evidence))

            refused = await client.call_tool("related", {"topic_id": 19})  # staff only
            assert refused.is_error and text(refused) == "no public topic with this id"
            assert not any(c in text(x) for x in (found, evidence, refused) for c in CANARIES)

    asyncio.run(scenario())


def test_the_sdk_session_does_the_classic_handshake(mcp_url: str) -> None:
    async def scenario() -> None:
        async with httpx2.AsyncClient(headers=AUTH, timeout=60) as http, \
                streamable_http_client(mcp_url, http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            init = await session.initialize()
            assert init.protocol_version == "2025-11-25"
            assert init.instructions and "retrieve" in init.instructions
            tools = await session.list_tools()
            assert {t.name for t in tools.tools} == {"search", "retrieve", "related"}
            related = await session.call_tool("related", {"topic_id": 9, "limit": 2})
            assert not related.is_error
            assert len(related.structured_content["results"]) == 2
            bad = await session.call_tool("search", {"query": ""})
            assert bad.is_error and text(bad).startswith("invalid arguments: query:")
            with pytest.raises(MCPError) as unknown:
                await session.call_tool("drop_tables", {})
            assert unknown.value.code == -32602

    asyncio.run(scenario())


def mcp_error(exc: BaseException) -> MCPError | None:
    """The MCPError in what the client raised (its task group wraps it in a group)."""
    if isinstance(exc, MCPError):
        return exc
    for inner in getattr(exc, "exceptions", ()):
        found = mcp_error(inner)
        if found is not None:
            return found
    return None


@pytest.mark.parametrize("headers,message", [
    ({}, "missing bearer token: send Authorization: Bearer <SIDECAR_API_KEY>"),
    ({"Authorization": "Bearer not-the-key"}, "invalid API key"),
])
def test_the_sdk_client_without_the_key_fails_with_the_reason(
        mcp_state: Any, headers: dict[str, str], message: str) -> None:
    res = fresh(mcp_state)  # its own wrong-key counts
    async def scenario(url: str) -> None:
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            with pytest.raises(BaseException) as raised:
                async with Client(streamable_http_client(url, http_client=http)):
                    pass
            refused = mcp_error(raised.value)
            assert refused is not None, raised.value
            # The probe is refused, the client falls back, and initialize is refused too.
            assert refused.error.message == message
            assert refused.error.data["status"] == 401

    with ThreadedHost(create_app(res.settings, res)) as host:
        asyncio.run(scenario(f"{host.url}/mcp"))
