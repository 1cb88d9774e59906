"""The ``answer`` tool (``/v1/answer`` over MCP), served only where an LLM writes answers, and
the prompt ``retrieve`` hands a client that brings its own LLM.

The LLM is a local server that speaks Ollama's API (tests/answer/ollama_server.py); its reply
carries a good citation, a citation of no evidence, an outside link and raw HTML, so what the
tool answers must be the sanitizer's text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from sidecar.api.app import create_app
from tests.answer.ollama_server import OllamaServer
from tests.mcp.conftest import CANARIES, call_tool, fresh, rpc, text_of
from tests.mcp.test_tools import metric

WIREGUARD = "WireGuard behind CGNAT with a VPS relay and PersistentKeepalive"
OFF_TOPIC = "What is the best recipe for a chocolate cake with buttercream frosting?"
EVIL = "http://evil.example/setup"
REPLY = (f"Rent a small VPS and relay WireGuard through it [[1]]; keep PersistentKeepalive "
         f"on [[9]]. Details: {EVIL} and <a href=\"{EVIL}\">this</a>.")
_LINK = re.compile(r"\]\((https?://[^)\s]+)\)")


@pytest.fixture(scope="module")
def llm() -> Iterator[OllamaServer]:
    server = OllamaServer().start()
    yield server
    server.stop()


@pytest.fixture
def answering(mcp_state: Any, llm: OllamaServer) -> Any:
    """A client of an app whose answers come from the Ollama-speaking server."""
    llm.reset()
    res = fresh(mcp_state, ollama_url=llm.url)
    return create_app(res.settings, res).test_client()


def test_answer_is_listed_only_with_an_llm(client: Any, answering: Any) -> None:
    names = [t["name"] for t in rpc(client, "tools/list").json["result"]["tools"]]
    assert "answer" not in names
    unknown = rpc(client, "tools/call", {"name": "answer", "arguments": {"question": "zfs?"}})
    assert unknown.json["error"]["code"] == -32602

    listed = rpc(answering, "tools/list").json["result"]["tools"]
    assert [t["name"] for t in listed] == ["answer", "search", "retrieve", "related"]
    assert listed[0]["inputSchema"]["required"] == ["question"]
    init = rpc(answering, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                         "clientInfo": {"name": "t", "version": "1"}})
    assert "`answer` writes a cited answer" in init.json["result"]["instructions"]


def test_answer_is_the_sanitized_answer_with_post_links(answering: Any,
                                                        llm: OllamaServer) -> None:
    llm.behaviour.reply = REPLY
    before = metric(answering, "sidecar_answers_total", outcome="answered")
    result = call_tool(answering, "answer", {"question": WIREGUARD, "locale": "en"})
    assert result["isError"] is False
    data = result["structuredContent"]
    assert (data["zone"], data["outcome"]) == ("normal", "answered")
    text = text_of(result)
    assert text == data["answer"]["markdown"]
    first = data["evidence"][0]
    assert f"[1]({first['url']})" in text and "**Sources**" in text
    assert "evil.example" not in text and "<a" not in text and "[[9]]" not in text
    assert set(_LINK.findall(text)) <= {e["url"] for e in data["evidence"]}
    assert [c["n"] for c in data["cited"]] == [1]
    assert "trace" not in data
    assert llm.chat_calls == 1
    assert metric(answering, "sidecar_answers_total", outcome="answered") == before + 1
    assert metric(answering, "sidecar_mcp_tool_calls_total", tool="answer", outcome="ok") >= 1


def test_answer_abstains_without_asking_the_llm(answering: Any, llm: OllamaServer) -> None:
    result = call_tool(answering, "answer", {"question": OFF_TOPIC, "locale": "en"})
    data = result["structuredContent"]
    assert (data["zone"], data["outcome"]) == ("abstain", "abstained")
    assert "no answer to this question yet" in text_of(result)
    assert llm.chat_calls == 0


def test_the_llm_down_gives_the_posts_that_may_answer(answering: Any,
                                                      llm: OllamaServer) -> None:
    llm.behaviour.status = 500
    result = call_tool(answering, "answer", {"question": WIREGUARD})
    data = result["structuredContent"]
    assert data["outcome"] == "failed" and result["isError"] is False
    assert data["evidence"][0]["url"] in text_of(result)


def test_answer_leaks_no_private_canary(answering: Any, llm: OllamaServer) -> None:
    # The stand-in LLM repeats everything it was sent: what the prompt held shows in the reply.
    llm.behaviour.reply = lambda messages: " ".join(m["content"] for m in messages)
    for query in ("my full VPS wg0.conf for the CGNAT relay with the real PrivateKey",
                  "rotating the restic repository password of the forum database backups"):
        body = rpc(answering, "tools/call", {"name": "answer", "arguments": {
            "question": query}}).get_data(as_text=True)
        assert not [c for c in CANARIES if c in body]
        sent = json.dumps(llm.chat_requests())
        assert not [c for c in CANARIES if c in sent]
    assert llm.chat_calls >= 1  # the LLM was asked: its prompt was checked, not only a refusal


def test_retrieve_hands_over_the_prompt_or_the_abstain_text(client: Any) -> None:
    answerable = call_tool(client, "retrieve", {"question": WIREGUARD})["structuredContent"]
    prompt = answerable["prompt"]
    assert [m["role"] for m in prompt["messages"]] == ["system", "user"]
    assert prompt["refusal"] == "NO_ANSWER" and answerable["abstain_text"] is None
    assert "<<<EVIDENCE n=1>>>" in prompt["messages"][1]["content"]

    result = call_tool(client, "retrieve", {"question": OFF_TOPIC, "locale": "fr"})
    data = result["structuredContent"]
    assert data["zone"] == "abstain" and data["prompt"] is None
    assert "pas encore de réponse" in data["abstain_text"]
    assert text_of(result).endswith(data["abstain_text"])
