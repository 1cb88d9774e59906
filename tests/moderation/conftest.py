"""Fixtures of the moderator review tests: a demo forum, a moderator key, stored retrievals."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb
from pydantic import SecretStr

from tests.conftest import demo_forum, owner_url

MODERATOR_KEY = "mod-4e64eeaad6357eca9d3de2df0eb0754f"
CE = "cross-encoder:mmarco-tiny"
BI = "bi-encoder:all-minilm-l6-v2"


@pytest.fixture(scope="module")
def mod_state(tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str, redis_url: str
              ) -> Iterator[Any]:
    """Resources over the demo forum (not embedded: a hash embedder), with a moderator key."""
    from models import DummyEmbedder

    with demo_forum(pg_admin_url, redis_url, tmp_path_factory.mktemp("moderation"),
                    DummyEmbedder(dimensions=16), prefix="t_mod", embed=False,
                    moderator_key=SecretStr(MODERATOR_KEY),
                    queue_prefix=f"modtest{uuid.uuid4().hex[:6]}") as res:
        yield res


@pytest.fixture(scope="module")
def mod_app(mod_state: Any) -> Any:
    """The app with moderation enabled."""
    from sidecar.api.app import create_app

    return create_app(mod_state.settings, mod_state)


@pytest.fixture(autouse=True)
def _forget_failed_logins(request: pytest.FixtureRequest) -> Iterator[None]:
    """Failed-attempt counters live in Redis; each test starts without any."""
    yield
    if "mod_state" in request.fixturenames:
        res = request.getfixturevalue("mod_state")
        for pattern in ("moderation:*", "throttle:*"):
            for key in res.redis.scan_iter(f"{res.settings.queue_prefix}:{pattern}"):
                res.redis.delete(key)


@pytest.fixture
def mod_client(mod_app: Any) -> Any:
    """A test client of that app."""
    return mod_app.test_client()


@pytest.fixture
def api_auth() -> dict[str, str]:
    """The moderator's bearer header."""
    return {"Authorization": f"Bearer {MODERATOR_KEY}"}


@pytest.fixture
def disabled_app(mod_state: Any) -> Any:
    """The same app with no moderator key configured."""
    from sidecar.api.app import create_app

    settings = mod_state.settings.model_copy(update={"moderator_key": None})
    res = dataclasses.replace(mod_state, settings=settings)
    return create_app(settings, res)


@pytest.fixture
def clean_retrievals(mod_state: Any) -> Iterator[str]:
    """An empty retrieval log (and its labels) for the test; the database URL."""
    url = owner_url(mod_state.urls.database_url)
    with psycopg.connect(url) as conn:
        conn.execute("DELETE FROM sidecar.sidecar_retrievals")
    yield url
    with psycopg.connect(url) as conn:
        conn.execute("DELETE FROM sidecar.sidecar_retrievals")


def add_retrieval(db_url: str, *, zone: str, score: float | None, scorer: str = CE,
                  query: str = "how do I renew a certificate?",
                  conversation: list[dict[str, str]] | None = None,
                  created_at: datetime | None = None, top_topic: int = 27,
                  gate_reason: str | None = None, candidates: list[dict[str, Any]] | None = None,
                  reason: str | None = None) -> str:
    """Store one retrieval the way /v1/retrieve does; its id."""
    rid = uuid.uuid4()
    evidence = [] if score is None else [{
        "n": 1, "topic_id": top_topic, "title": f"Topic {top_topic}", "post_id": 169,
        "post_number": 1, "url": f"https://forum.example.org/t/slug/{top_topic}/1",
        "excerpt": "…", "score": score, "neighbours": []}]
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "INSERT INTO sidecar.sidecar_retrievals (id, created_at, conversation, query,"
            " query_source,"
            " locale, zone, gate_reason, scorer, top_score, scores, evidence, candidates, trace)"
            " VALUES (%s, coalesce(%s, now()), %s, %s, %s, NULL, %s, %s, %s, %s, %s, %s, %s, %s)",
            (rid, created_at, Jsonb(conversation or [{"role": "user", "content": query}]),
             "" if gate_reason else query, "gate" if gate_reason else "single_turn", zone,
             gate_reason, "none" if gate_reason else scorer, score,
             Jsonb([] if score is None else [score]), Jsonb(evidence),
             Jsonb(candidates if candidates is not None else
                   [{"topic_id": top_topic, "post_id": 169, "score": score, "fused_rank": 1}]),
             Jsonb([{"step": "zone", "status": "done", "ms": 0.1,
                     "detail": {"zone": zone, **({"reason": reason} if reason else {})}}])),
        )
    return str(rid)
