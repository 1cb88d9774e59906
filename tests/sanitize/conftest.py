"""Fixtures of the sanitizer tests: a demo forum (no embeddings needed) and stored retrievals.

Each module gets its own database (the tests hide and restore posts to check the sanitizer
re-reads the forum at the moment it runs); retrievals are inserted with SQL in the shape
``/v1/retrieve`` stores them (migration ``0003_retrievals``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.conftest import API_KEY, drop_database, make_settings, new_database

FORUM = "https://forum.example.org"


@pytest.fixture(scope="module")
def forum_url(pg_admin_url: str) -> Iterator[str]:
    """A database of its own for the module."""
    url = new_database(pg_admin_url, "t_san")
    yield url
    drop_database(pg_admin_url, url)


@pytest.fixture(scope="module")
def forum_state(tmp_path_factory: pytest.TempPathFactory, forum_url: str, redis_url: str
                ) -> Iterator[Any]:
    """Resources over the imported demo forum (a hash embedder: nothing here embeds)."""
    from models import DummyEmbedder
    from sidecar.runtime.bootstrap import load_demo
    from sidecar.runtime.resources import start_resources

    settings = make_settings(tmp_path_factory.mktemp("sanitize"), forum_url, redis_url)
    res = start_resources(settings, embedder=DummyEmbedder(dimensions=16))
    load_demo(res)
    yield res
    res.close()


@pytest.fixture(scope="module")
def app(forum_state: Any) -> Any:
    """The app over that forum."""
    from sidecar.api.app import create_app

    return create_app(forum_state.settings, forum_state)


@pytest.fixture
def http(app: Any) -> Any:
    """A test client."""
    return app.test_client()


@pytest.fixture
def auth() -> dict[str, str]:
    """The API key header."""
    return {"Authorization": f"Bearer {API_KEY}"}


def post_row(conn: psycopg.Connection[Any], post_id: int) -> dict[str, Any]:
    """A post with its topic's title and slug (whatever its visibility)."""
    row = conn.execute(
        "SELECT p.id, p.topic_id, p.post_number, t.title, coalesce(t.slug, 'topic') AS slug"
        " FROM posts p JOIN topics t ON t.id = p.topic_id WHERE p.id = %s", (post_id,)
    ).fetchone()
    assert row is not None, post_id
    return dict(zip(("post_id", "topic_id", "post_number", "title", "slug"), row, strict=True))


def evidence_for(db_url: str, post_ids: list[int], neighbours: dict[int, list[int]] | None = None
                 ) -> list[dict[str, Any]]:
    """Evidence items as /v1/retrieve stores them, numbered from 1 in the given order."""
    items = []
    with psycopg.connect(db_url) as conn:
        for n, pid in enumerate(post_ids, start=1):
            p = post_row(conn, pid)
            url = f"{FORUM}/t/{p['slug']}/{p['topic_id']}/{p['post_number']}"
            nbs = []
            for nid in (neighbours or {}).get(pid, []):
                q = post_row(conn, nid)
                nbs.append({"post_id": nid, "post_number": q["post_number"],
                            "url": f"{FORUM}/t/{q['slug']}/{q['topic_id']}/{q['post_number']}",
                            "excerpt": "..."})
            items.append({"n": n, "topic_id": p["topic_id"], "title": p["title"],
                          "post_id": pid, "post_number": p["post_number"], "url": url,
                          "excerpt": "...", "score": 1.0 - n / 10, "neighbours": nbs})
    return items


def store_retrieval(db_url: str, evidence: list[dict[str, Any]], *, locale: str | None = None,
                    zone: str = "normal") -> str:
    """Insert a retrieval row; its id."""
    rid = uuid.uuid4()
    with psycopg.connect(db_url) as conn:
        conn.execute(
            "INSERT INTO sidecar.sidecar_retrievals (id, conversation, query, query_source,"
            " locale, zone,"
            " scorer, top_score, scores, evidence, candidates)"
            " VALUES (%s, %s, %s, 'single_turn', %s, %s, 'cross-encoder:tiny', %s, %s, %s, '[]')",
            (rid, Jsonb([{"role": "user", "content": "q"}]), "q", locale, zone,
             evidence[0]["score"] if evidence else None,
             Jsonb([e["score"] for e in evidence]), Jsonb(evidence)),
        )
    return str(rid)


def public_post_ids(db_url: str) -> set[int]:
    """Public posts, by the definition the tests hold independently of the sidecar's filter."""
    with psycopg.connect(db_url) as conn:
        return {r[0] for r in conn.execute("""
            SELECT p.id FROM posts p JOIN topics t ON t.id = p.topic_id
            JOIN categories c ON c.id = t.category_id
            LEFT JOIN categories pc ON pc.id = c.parent_category_id
            WHERE p.deleted_at IS NULL AND NOT p.hidden AND NOT p.user_deleted
              AND p.post_type = 1 AND t.deleted_at IS NULL AND t.visible
              AND t.archetype = 'regular' AND NOT c.read_restricted
              AND NOT coalesce(pc.read_restricted, false)""")}


def non_public_examples(db_url: str) -> dict[str, int]:
    """One demo post of each kind of private content."""
    queries = {
        "restricted": "SELECT p.id FROM posts p JOIN topics t ON t.id = p.topic_id"
                      " JOIN categories c ON c.id = t.category_id WHERE c.read_restricted",
        "pm": "SELECT p.id FROM posts p JOIN topics t ON t.id = p.topic_id"
              " WHERE t.archetype = 'private_message'",
        "deleted": "SELECT id FROM posts WHERE deleted_at IS NOT NULL",
        "hidden": "SELECT id FROM posts WHERE hidden",
        "whisper": "SELECT id FROM posts WHERE post_type = 4",
    }
    found = {}
    with psycopg.connect(db_url) as conn:
        for kind, q in queries.items():
            row = conn.execute(q + " ORDER BY 1 LIMIT 1").fetchone()  # type: ignore[operator]
            if row:
                found[kind] = row[0]
    return found
