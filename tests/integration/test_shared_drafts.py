"""Shared drafts: a topic with a ``shared_drafts`` row is left out everywhere, as an unlisted one
is (Discourse hides it from anyone who may not see shared drafts, whatever its category)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from models.protocols import Embedder
from sidecar.core.types import Mode
from sidecar.db.public import public_post_ids
from sidecar.search.service import SearchOptions
from tests.conftest import API_KEY, demo_forum, owner_url

# Demo topic 9 (WireGuard behind CGNAT) is public, in a public category, and found first.
DRAFT = 9
QUERY = "WireGuard behind CGNAT with a VPS relay and PersistentKeepalive"
AUTH = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture(scope="module")
def drafted(pg_admin_url: str, redis_url: str, minilm: Embedder,
            tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, list[int]]]:
    """The demo forum, embedded; topic 9 becomes a shared draft once its posts are indexed."""
    with demo_forum(pg_admin_url, redis_url, tmp_path_factory.mktemp("drafts"), minilm,
                    prefix="t_drafts") as res:
        with psycopg.connect(owner_url(res.urls.database_url)) as conn:
            posts = [r[0] for r in conn.execute(
                "SELECT id FROM posts WHERE topic_id = %s ORDER BY id", (DRAFT,))]
            with res.db.connection() as sidecar:
                assert public_post_ids(sidecar, posts)  # public before
                found = res.search.find_topics(QUERY, 5, SearchOptions()).topics
                assert found[0].topic_id == DRAFT
            # Discourse writes it (the forum's owner here): staff shared the topic as a draft.
            conn.execute("INSERT INTO shared_drafts (topic_id, category_id, created_at,"
                         " updated_at) SELECT id, category_id, now(), now() FROM topics"
                         " WHERE id = %s", (DRAFT,))
        yield res, posts


def test_a_shared_draft_s_posts_are_not_public(drafted: tuple[Any, list[int]]) -> None:
    res, posts = drafted
    with res.db.connection() as conn:
        assert public_post_ids(conn, posts) == []


def test_search_never_finds_a_shared_draft(drafted: tuple[Any, list[int]]) -> None:
    res, _ = drafted
    for mode in Mode:
        found = res.search.find_topics(QUERY, 20, SearchOptions(mode=mode)).topics
        assert found and DRAFT not in {t.topic_id for t in found}, mode


def test_the_api_treats_a_shared_draft_as_private(drafted: tuple[Any, list[int]]) -> None:
    from sidecar.api.app import create_app

    res, _ = drafted
    client = create_app(res.settings, res).test_client()
    found = client.post("/v1/search", json={"query": QUERY, "limit": 10}, headers=AUTH)
    assert found.status_code == 200, found.json
    assert DRAFT not in {r["topic_id"] for r in found.json["results"]}
    assert client.get(f"/v1/topics/{DRAFT}/related", headers=AUTH).status_code == 404
