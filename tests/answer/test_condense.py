"""Condensing through the Ollama API, with the Redis cache, the daily budget and the fallback."""

from __future__ import annotations

import os
import uuid
from typing import Any

import pytest

from sidecar.answer.condense import Condenser
from sidecar.answer.ollama import OllamaChat
from sidecar.core.condense import Turn
from tests.answer.ollama_server import OllamaServer

# Read at import: the session fixture of the root conftest hides OLLAMA_URL from the tests.
REAL_OLLAMA = os.environ.get("SIDECAR_TEST_OLLAMA_URL") or os.environ.get("OLLAMA_URL")
REAL_MODEL = os.environ.get("SIDECAR_OLLAMA_MODEL", "qwen3:30b-a3b")

FOLLOW_UP = [
    Turn("user", "How do I get WireGuard through CGNAT with a VPS relay?"),
    Turn("assistant", "Put the WireGuard server on the VPS and use PersistentKeepalive = 25."),
    Turn("user", "and what MTU for that?"),
]
REWRITE = "WireGuard MTU for a VPS relay behind CGNAT"


def condenser(redis_client: Any, url: str | None, *, timeout: float = 5.0, budget: int = 100,
              model: str = "qwen3:30b-a3b", max_turns: int = 3) -> Condenser:
    llm = OllamaChat(url, model, timeout_s=timeout, keep_alive="7m") if url else None
    return Condenser(redis_client, llm, max_turns=max_turns, cache_ttl_s=600, daily_budget=budget,
                     max_query_chars=2000, namespace=f"t{uuid.uuid4().hex[:8]}")


def test_single_turn_is_used_as_is_without_any_call(
    redis_client: Any, fake_ollama: OllamaServer
) -> None:
    result = condenser(redis_client, fake_ollama.url).condense(
        [Turn("user", "  ZFS   scrub errors ")])
    assert (result.source, result.query, result.llm_call) == ("single_turn", "ZFS scrub errors",
                                                              None)
    assert fake_ollama.chat_calls == 0


def test_follow_up_is_rewritten_then_served_from_cache(
    redis_client: Any, fake_ollama: OllamaServer
) -> None:
    fake_ollama.behaviour.reply = f"<think></think>\n{REWRITE}\n"
    c = condenser(redis_client, fake_ollama.url)
    first = c.condense(FOLLOW_UP)
    assert (first.source, first.query, first.llm_call, first.cache) == ("llm", REWRITE, "ok",
                                                                         "miss")
    assert fake_ollama.chat_calls == 1
    body = fake_ollama.chat_requests()[0]
    assert body["model"] == "qwen3:30b-a3b"
    assert body["think"] is False and body["stream"] is False and body["keep_alive"] == "7m"
    assert body["messages"][0]["role"] == "system"
    sent = body["messages"][1]["content"]
    assert FOLLOW_UP[0].content in sent and "and what MTU for that?" in sent

    # The same conversation, differently spaced and cased: the cache answers, no LLM call.
    again = [Turn(t.role, f" {t.content.upper()} ") for t in FOLLOW_UP]
    second = c.condense(again)
    assert (second.source, second.query, second.cache, second.llm_call) == ("cache", REWRITE,
                                                                            "hit", None)
    assert fake_ollama.chat_calls == 1


def test_only_the_configured_number_of_previous_turns_is_sent(
    redis_client: Any, fake_ollama: OllamaServer
) -> None:
    turns = [Turn("user" if i % 2 == 0 else "assistant", f"message number {i}") for i in range(8)]
    turns.append(Turn("user", "and that one?"))
    condenser(redis_client, fake_ollama.url, max_turns=3).condense(turns)
    sent = fake_ollama.chat_requests()[0]["messages"][1]["content"]
    assert "message number 5" in sent and "message number 7" in sent
    assert "message number 4" not in sent


@pytest.mark.parametrize(
    ("setup", "reason", "llm_call"),
    [
        ({"delay_s": 1.5}, "timeout", "timeout"),
        ({"status": 500, "error": "llama runner process has terminated"}, "error:http_500",
         "error"),
        ({"models": ["llama3.1:8b"]}, "error:http_404", "error"),
        ({"reply": "<think>only thinking, never an answer"}, "bad_output", "bad_output"),
        ({"reply": "   "}, "bad_output", "bad_output"),
        ({"reply": "x" * 900}, "bad_output", "bad_output"),
    ],
)
def test_llm_failures_fall_back_and_say_why(
    redis_client: Any, fake_ollama: OllamaServer, setup: dict[str, Any], reason: str,
    llm_call: str
) -> None:
    for key, value in setup.items():
        setattr(fake_ollama.behaviour, key, value)
    c = condenser(redis_client, fake_ollama.url, timeout=0.5)
    result = c.condense(FOLLOW_UP)
    assert result.source == "fallback"
    assert result.reason == reason
    assert result.llm_call == llm_call and result.failed
    assert result.query == f"{FOLLOW_UP[0].content} {FOLLOW_UP[-1].content}"
    assert result.detail["rule"] == "joined_reference"
    if reason == "error:http_404":
        assert "not found" in result.detail["error"]
    # A failure is not cached: the next request asks again.
    fake_ollama.behaviour.delay_s, fake_ollama.behaviour.status = 0, None
    fake_ollama.behaviour.models, fake_ollama.behaviour.reply = ["qwen3:30b-a3b"], REWRITE
    assert c.condense(FOLLOW_UP).source == "llm"


def test_ollama_down_falls_back(redis_client: Any, free_port_url: str) -> None:
    result = condenser(redis_client, free_port_url).condense(FOLLOW_UP)
    assert (result.source, result.reason, result.llm_call) == ("fallback", "error:unreachable",
                                                               "error")


def test_no_llm_configured_falls_back_without_error(redis_client: Any) -> None:
    result = condenser(redis_client, None).condense(FOLLOW_UP)
    assert (result.source, result.reason, result.llm_call) == ("fallback", "no_llm_configured",
                                                               None)
    assert not result.failed


def test_daily_budget_is_enforced_per_utc_day(
    redis_client: Any, fake_ollama: OllamaServer
) -> None:
    fake_ollama.behaviour.reply = lambda messages: "rewrite of " + messages[-1]["content"][-30:]
    c = condenser(redis_client, fake_ollama.url, budget=2)
    sources = [c.condense([FOLLOW_UP[0], Turn("user", f"and for case {i}?")]).source
               for i in range(4)]
    assert sources == ["llm", "llm", "fallback", "fallback"]
    assert fake_ollama.chat_calls == 2
    spent = c.condense([FOLLOW_UP[0], Turn("user", "and for case 9?")])
    assert (spent.reason, spent.llm_call) == ("budget_spent", None)
    assert int(redis_client.get(c.budget_key())) >= 3
    assert 0 < redis_client.ttl(c.budget_key()) <= 2 * 24 * 3600
    # Cached conversations are still served once the budget is spent.
    assert c.condense([FOLLOW_UP[0], Turn("user", "and for case 0?")]).source == "cache"


def test_zero_budget_never_calls(redis_client: Any, fake_ollama: OllamaServer) -> None:
    result = condenser(redis_client, fake_ollama.url, budget=0).condense(FOLLOW_UP)
    assert (result.source, result.reason) == ("fallback", "budget_spent")
    assert fake_ollama.chat_calls == 0


def test_cache_entries_expire(redis_client: Any, fake_ollama: OllamaServer) -> None:
    fake_ollama.behaviour.reply = REWRITE
    c = condenser(redis_client, fake_ollama.url)
    c.condense(FOLLOW_UP)
    keys = [k for k in redis_client.scan_iter(f"{c.namespace}:condense:*")
            if b":calls:" not in k]
    assert len(keys) == 1
    assert 0 < redis_client.ttl(keys[0]) <= 600


@pytest.mark.skipif(not REAL_OLLAMA, reason="OLLAMA_URL is not set")
def test_against_a_real_ollama(redis_client: Any) -> None:
    c = condenser(redis_client, REAL_OLLAMA, timeout=120, model=REAL_MODEL)
    result = c.condense(FOLLOW_UP)
    assert result.source == "llm", result
    assert "<think>" not in result.query and 0 < len(result.query) <= 400
    assert c.condense(FOLLOW_UP).source == "cache"


def test_redis_down_never_raises_and_spends_nothing(fake_ollama: OllamaServer) -> None:
    import redis

    dead = redis.Redis(unix_socket_path="/nonexistent/redis.sock", socket_timeout=0.2)
    c = Condenser(dead, OllamaChat(fake_ollama.url, "qwen3:30b-a3b", timeout_s=5),
                  max_turns=3, cache_ttl_s=60, daily_budget=10, max_query_chars=2000)
    result = c.condense(FOLLOW_UP)
    assert result.source == "fallback" and result.cache == "error"
    assert result.reason is not None and result.reason.startswith("error:budget_unavailable")
    assert fake_ollama.chat_calls == 0  # without the counter, no call is made blindly
