"""Condensing with an LLM, a Redis cache, a daily call budget and an honest fallback.

The cheap path is the default (design note 000): a single-turn question is used as it is; a
conversation seen before is answered from the cache; the LLM is called only on a miss and while
today's budget lasts; any failure falls back to a deterministic rewrite, and the result says
which path ran and why.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

import redis

from sidecar.answer.llm import ChatLLM, LLMFailure
from sidecar.core.condense import (
    Turn,
    build_messages,
    cache_key,
    clean_output,
    fallback_query,
    normalize,
    window,
)

log = logging.getLogger(__name__)

QuerySource = Literal["single_turn", "llm", "cache", "fallback"]
# A condensed query longer than this is not a search query any more.
MAX_OUTPUT_CHARS = 400


@dataclass
class Condensed:
    """The standalone query and how it was obtained.

    ``reason`` says why a fallback was used (no_llm_configured, timeout, error:..., budget_spent,
    bad_output); ``llm_call`` the result of the LLM call if one was made (ok, timeout, error,
    bad_output); ``cache`` the cache lookup (hit, miss, error) if one was made.
    """

    query: str
    source: QuerySource
    reason: str | None = None
    llm_call: str | None = None
    cache: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        """True when the LLM was asked and gave nothing usable."""
        return self.llm_call is not None and self.llm_call != "ok"


class Condenser:
    """Rewrites the latest message of a conversation into a standalone query."""

    def __init__(
        self,
        redis_client: redis.Redis,
        llm: ChatLLM | None,
        *,
        max_turns: int,
        cache_ttl_s: int,
        daily_budget: int,
        max_query_chars: int,
        namespace: str = "sidecar",
    ) -> None:
        self.redis = redis_client
        self.llm = llm
        self.max_turns = max_turns
        self.cache_ttl_s = cache_ttl_s
        self.daily_budget = daily_budget
        self.max_query_chars = max_query_chars
        self.namespace = namespace

    def budget_key(self, now: datetime | None = None) -> str:
        """The Redis counter of today's LLM calls (UTC day)."""
        day = (now or datetime.now(UTC)).strftime("%Y-%m-%d")
        return f"{self.namespace}:condense:calls:{day}"

    def condense(self, turns: Sequence[Turn]) -> Condensed:
        """The standalone query for the last turn (never raises)."""
        latest = " ".join(turns[-1].content.split())
        if len(turns) == 1 or not any(t.content.strip() for t in turns[:-1]):
            return Condensed(latest, "single_turn", detail={"turns": 1})
        used = window(turns, self.max_turns)
        detail: dict[str, Any] = {"turns": len(used)}
        if self.llm is None:
            return self._fallback(used, "no_llm_configured", detail)
        key = f"{self.namespace}:condense:{cache_key(used, self.llm.model)}"
        detail["model"] = self.llm.model
        cache_state = "miss"
        try:
            hit = self.redis.get(key)
        except redis.RedisError as exc:
            # A cache that cannot be read is a miss; the budget check below decides the rest.
            log.warning("condense cache unreadable: %s", exc)
            hit, cache_state = None, "error"
        if isinstance(hit, bytes) and hit:
            return Condensed(hit.decode("utf-8"), "cache", cache="hit", detail=detail)
        spent = self._spend_budget()
        if spent is not None:
            result = self._fallback(used, spent, detail)
            result.cache = cache_state
            return result
        try:
            reply = self.llm.chat(build_messages(used))
        except LLMFailure as exc:
            result = self._fallback(used, exc.reason, {**detail, "error": exc.message})
            result.cache, result.llm_call = cache_state, exc.reason.split(":")[0]
            return result
        except Exception as exc:  # an adapter bug must not take retrieval down
            log.exception("condense LLM call failed")
            result = self._fallback(used, f"error:{type(exc).__name__}",
                                    {**detail, "error": str(exc)[:300]})
            result.cache, result.llm_call = cache_state, "error"
            return result
        query = clean_output(reply, max_chars=min(MAX_OUTPUT_CHARS, self.max_query_chars))
        if query is None:
            result = self._fallback(used, "bad_output", {**detail, "output": reply[:200]})
            result.cache, result.llm_call = cache_state, "bad_output"
            return result
        try:
            self.redis.set(key, query.encode("utf-8"), ex=self.cache_ttl_s)
        except redis.RedisError as exc:
            log.warning("condense cache unwritable: %s", exc)
        if normalize(query) == normalize(latest):
            detail["unchanged"] = True
        return Condensed(query, "llm", llm_call="ok", cache=cache_state, detail=detail)

    def _spend_budget(self) -> str | None:
        """Count one call against today's budget; the fallback reason if none is left."""
        if self.daily_budget <= 0:
            return "budget_spent"
        key = self.budget_key()
        try:
            with self.redis.pipeline() as pipe:
                pipe.incr(key)
                pipe.expire(key, 2 * 24 * 3600)
                count = int(pipe.execute()[0])
        except redis.RedisError as exc:
            # Without the counter the budget cannot be enforced: do not spend blindly.
            return f"error:budget_unavailable ({type(exc).__name__})"
        return "budget_spent" if count > self.daily_budget else None

    def _fallback(self, used: Sequence[Turn], reason: str, detail: dict[str, Any]) -> Condensed:
        fb = fallback_query(used, max_chars=self.max_query_chars)
        return Condensed(fb.query, "fallback", reason=reason,
                         detail={**detail, "rule": fb.rule})
