"""The MCP tools over the demo forum: what they return, how they fail, what never leaves.

Each tool runs what its /v1 route runs, so the answers are compared with the routes' own; a
tool's failure (bad arguments, a topic that is not public, the model down) is a result with
``isError`` the LLM can read, never an HTTP error; no private canary of the demo appears in any
tool's output, whatever it is asked.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import pytest

from models.client import RemoteEmbedder
from sidecar.api.app import create_app
from sidecar.search.service import SearchService
from tests.answer.conftest import DATA
from tests.conftest import API_KEY
from tests.mcp.conftest import (
    AUTH,
    CANARIES,
    POST_LINK,
    PRIVATE_TOPICS,
    call_tool,
    fresh,
    rpc,
    text_of,
)

PROBES = json.loads((DATA / "demo_private_probes.json").read_text())
WIREGUARD = "WireGuard behind CGNAT with a VPS relay and PersistentKeepalive"


def metric(client: Any, name: str, **labels: str) -> float:
    text = client.get("/metrics", headers={"Authorization": f"Bearer {API_KEY}"}).get_data(
        as_text=True)
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(name + "{"):
            found = ",".join(sorted(re.findall(r'\w+="[^"]*"', line.partition("{")[2])))
            if found == want:
                return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_search_is_the_search_route_with_post_links(client: Any) -> None:
    result = call_tool(client, "search", {"query": WIREGUARD, "limit": 3})
    route = client.post("/v1/search", json={"query": WIREGUARD, "limit": 3}, headers=AUTH).json
    hits = result["structuredContent"]["results"]
    assert [(h["topic_id"], h["url"]) for h in hits] == [
        (r["topic_id"], r["url"]) for r in route["results"]]
    assert hits[0]["topic_id"] == 9
    text = text_of(result)
    assert text.startswith(f'Topics found for "{WIREGUARD}", best first:')
    for hit in hits:
        assert POST_LINK.fullmatch(hit["url"]) and f"]({hit['url']})" in text


def test_search_without_a_match_says_so(client: Any) -> None:
    result = call_tool(client, "search", {"query": "zzqxv-nothing-matches", "limit": 3})
    assert result["isError"] is False
    if not result["structuredContent"]["results"]:
        assert text_of(result) == 'No public topic matches "zzqxv-nothing-matches".'


def test_related_is_the_related_route(client: Any) -> None:
    result = call_tool(client, "related", {"topic_id": 9, "limit": 4})
    route = client.get("/v1/topics/9/related?limit=4", headers=AUTH).json
    data = result["structuredContent"]
    assert data["topic_id"] == 9 and data["title"] == route["title"]
    assert [h["url"] for h in data["results"]] == [r["url"] for r in route["results"]]
    assert 9 not in {h["topic_id"] for h in data["results"]}
    assert all(POST_LINK.fullmatch(h["url"]) for h in data["results"])
    assert text_of(result).startswith(f'Topics related to "{route["title"]}" (topic 9)')


@pytest.mark.parametrize("topic_id", [*PRIVATE_TOPICS, 999_999])
def test_related_to_a_topic_that_is_not_public_is_a_tool_error(client: Any,
                                                               topic_id: int) -> None:
    result = call_tool(client, "related", {"topic_id": topic_id})
    assert result["isError"] is True
    assert text_of(result) == "no public topic with this id"
    assert "structuredContent" not in result


def test_retrieve_gives_the_zone_and_numbered_evidence(client: Any) -> None:
    result = call_tool(client, "retrieve", {"question": WIREGUARD, "limit": 3})
    data = result["structuredContent"]
    assert data["zone"] in ("normal", "cautious")
    assert [e["n"] for e in data["evidence"]] == [1, 2, 3]
    assert data["evidence"][0]["topic_id"] == 9
    assert "trace" not in data
    text = text_of(result)
    assert text.startswith(f"Zone: {data['zone']}. The evidence answers")
    assert f"\nWhy: {data['zone_reason']}\n" in text
    for item in data["evidence"]:
        assert f"[{item['n']}] {item['title']}\n{item['url']}\n" in text


def test_retrieve_reads_the_conversation(client: Any) -> None:
    history = [
        {"role": "user", "content": "My ISP puts me behind CGNAT and I want to reach my home "
                                    "lab."},
        {"role": "assistant", "content": "A common way is a tunnel to a cheap VPS that relays "
                                         "the traffic to your home."}]
    result = call_tool(client, "retrieve", {"question": "which tunnel software would you use "
                                                        "for that?", "history": history})
    data = result["structuredContent"]
    assert data["query_source"] != "single_turn"
    assert 9 in {e["topic_id"] for e in data["evidence"]}


def test_retrieve_says_to_abstain_and_why(client: Any) -> None:
    result = call_tool(client, "retrieve", {"question": "thanks!"})
    assert result["isError"] is False
    assert result["structuredContent"]["zone"] == "abstain"
    assert text_of(result).startswith("Zone: abstain. The forum's public posts do not answer")
    assert "\nWhy: input gate: " in text_of(result)
    assert "do not guess" in text_of(result)


@pytest.mark.parametrize("name,arguments,message", [
    ("search", {}, "invalid arguments: query: Field required"),
    ("search", {"query": ""}, "invalid arguments: query: String should have at least 1"),
    ("search", {"query": "zfs", "limit": 0}, "invalid arguments: limit: Input should be"),
    ("search", {"query": "zfs", "limit": "many"}, "invalid arguments: limit: Input should be"),
    ("search", {"query": "zfs", "category": "x"}, "invalid arguments: category: Extra inputs"),
    ("search", {"query": "   "}, "query is empty"),
    ("search", {"query": "zfs " * 2000}, "query is"),
    ("related", {"topic_id": "nine"}, "invalid arguments: topic_id: Input should be"),
    ("related", {"topic_id": 2**31}, "invalid arguments: topic_id: Input should be"),
    ("retrieve", {"question": "zfs?", "history": [{"role": "system", "content": "x"}]},
     "invalid arguments: history.0.role: Input should be 'user' or 'assistant'"),
    ("retrieve", {"question": "zfs?", "locale": "fr; DROP"},
     "invalid arguments: locale: String should match pattern"),
])
def test_bad_arguments_are_a_tool_error_the_llm_can_read(
        client: Any, name: str, arguments: dict[str, Any], message: str) -> None:
    before = metric(client, "sidecar_mcp_tool_calls_total", tool=name, outcome="invalid")
    result = call_tool(client, name, arguments)
    assert result["isError"] is True
    assert text_of(result).startswith(message), text_of(result)
    outcome = "invalid" if message.startswith("invalid") else "refused"
    if outcome == "invalid":
        assert metric(client, "sidecar_mcp_tool_calls_total", tool=name,
                      outcome="invalid") == before + 1


def test_numbers_sent_as_strings_are_read(client: Any) -> None:
    # LLMs often send "3" for 3: lax, where the meaning is plain.
    result = call_tool(client, "related", {"topic_id": "9", "limit": "3"})
    assert result["isError"] is False and len(result["structuredContent"]["results"]) == 3


def test_tool_calls_are_counted_by_tool_and_outcome(client: Any) -> None:
    before = metric(client, "sidecar_mcp_tool_calls_total", tool="search", outcome="ok")
    call_tool(client, "search", {"query": "ZFS scrub"})
    after = metric(client, "sidecar_mcp_tool_calls_total", tool="search", outcome="ok")
    assert after == before + 1
    assert metric(client, "sidecar_stage_seconds_count", step="semantic", status="done") > 0


def test_the_model_down_is_a_tool_error_not_a_500(mcp_state: Any, minilm: Any) -> None:
    import socket

    with socket.socket() as sock:  # a port where nothing listens
        sock.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{sock.getsockname()[1]}"
    res = fresh(mcp_state)
    down = RemoteEmbedder(dead, name=minilm.name)
    search = SearchService(res.db, down, res.model, res.settings,
                           iterative_scan=res.search.iterative_scan, served=res.search.served,
                           served_details=res.search.served_details)
    res = dataclasses.replace(res, loaded=dataclasses.replace(res.loaded_models(),
                                                              search=search, embedder=down))
    client = create_app(res.settings, res).test_client()
    for name, arguments in (("search", {"query": "ZFS scrub"}),
                            ("retrieve", {"question": "How do I scrub a ZFS pool?"})):
        result = call_tool(client, name, arguments)
        assert result["isError"] is True, result
        assert text_of(result) == "the model is unavailable right now; try again later"
        assert metric(client, "sidecar_mcp_tool_calls_total", tool=name,
                      outcome="unavailable") == 1
    down.close()


def test_no_private_canary_leaves_through_any_tool(client: Any) -> None:
    assert len(CANARIES) >= 10
    answers: list[tuple[str, str]] = []  # (the body, what it may echo: the question asked)
    for probe in PROBES:
        for name, arguments in (("search", {"query": probe["query"], "limit": 20}),
                                ("retrieve", {"question": probe["query"], "limit": 12})):
            body = rpc(client, "tools/call", {"name": name, "arguments": arguments})
            answers.append((body.get_data(as_text=True), probe["query"]))
    for topic_id in range(1, 45):
        body = rpc(client, "tools/call", {"name": "related", "arguments": {
            "topic_id": topic_id, "limit": 10}})
        answers.append((body.get_data(as_text=True), ""))
    listed: set[int] = set()
    answered = 0
    for body, asked in answers:
        # One probe names the canaries themselves: the tool may repeat the question, and only
        # the question.
        shown = body.replace(json.dumps(asked)[1:-1], "") if asked else body
        assert not [c for c in CANARIES if c in shown], shown[:500]
        result = json.loads(body)["result"]
        data = result.get("structuredContent") or {}
        answered += not result["isError"]
        listed |= {item["topic_id"] for item in data.get("results", data.get("evidence", []))}
    assert answered > 2 * len(PROBES) + 20  # the public topics' related lists answered
    assert listed and not listed & set(PRIVATE_TOPICS)
