"""Stored evidence is re-checked when it is shown: a post that became private since is withheld.

A retrieval stores the evidence it answered (titles, excerpts, links). The moderator pages and
API show it later, when a post may have been hidden, deleted or moved out of the public: its
title and excerpt are then withheld, in the detail and in the list alike.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from tests.moderation.conftest import add_retrieval
from tests.moderation.test_moderation_pages import login

SECRET_EXCERPT = "an excerpt that must not outlive the publicity of its post"


@pytest.fixture
def evidence_post(clean_retrievals: str) -> Iterator[dict[str, Any]]:
    """A public post of the demo forum, hidden again after the test if the test hid it."""
    with psycopg.connect(clean_retrievals) as conn:
        row = conn.execute(
            "SELECT p.id, p.topic_id, p.post_number, t.title FROM posts p"
            " JOIN topics t ON t.id = p.topic_id JOIN categories c ON c.id = t.category_id"
            " WHERE p.post_type = 1 AND NOT p.hidden AND p.deleted_at IS NULL AND t.visible"
            " AND t.archetype = 'regular' AND NOT c.read_restricted AND c.parent_category_id"
            " IS NULL ORDER BY p.id LIMIT 1").fetchone()
    assert row is not None
    yield {"id": row[0], "topic_id": row[1], "post_number": row[2], "title": row[3]}
    with psycopg.connect(clean_retrievals) as conn:
        conn.execute("UPDATE posts SET hidden = false WHERE id = %s", (row[0],))


def _store(db_url: str, post: dict[str, Any]) -> str:
    rid = add_retrieval(db_url, zone="abstain", score=0.2, top_topic=post["topic_id"])
    evidence = [{"n": 1, "topic_id": post["topic_id"], "title": f"{post['title']} UNIQUE",
                 "post_id": post["id"], "post_number": post["post_number"],
                 "url": f"https://forum.example.org/t/x/{post['topic_id']}/1",
                 "excerpt": SECRET_EXCERPT, "score": 0.2,
                 "neighbours": [{"post_id": post["id"], "post_number": 1, "url": "/t/x/1",
                                 "excerpt": SECRET_EXCERPT}]}]
    with psycopg.connect(db_url) as conn:
        conn.execute("UPDATE sidecar.sidecar_retrievals SET evidence = %s WHERE id = %s",
                     (Jsonb(evidence), rid))
    return rid


def test_evidence_of_a_post_that_became_private_is_withheld(
    mod_client: Any, api_auth: dict[str, str], clean_retrievals: str,
    evidence_post: dict[str, Any]
) -> None:
    rid = _store(clean_retrievals, evidence_post)
    title = f"{evidence_post['title']} UNIQUE"
    assert login(mod_client).status_code == 303
    page = mod_client.get(f"/moderation/retrievals/{rid}").get_data(as_text=True)
    assert SECRET_EXCERPT in page  # public: shown as stored
    listing = mod_client.get("/v1/moderation/retrievals", headers=api_auth).json
    assert listing["items"][0]["top_title"] == title

    with psycopg.connect(clean_retrievals) as conn:  # the post is hidden since
        conn.execute("UPDATE posts SET hidden = true WHERE id = %s", (evidence_post["id"],))

    page = mod_client.get(f"/moderation/retrievals/{rid}").get_data(as_text=True)
    assert SECRET_EXCERPT not in page and title not in page
    assert "no longer public" in page
    detail = mod_client.get(f"/v1/moderation/retrievals/{rid}", headers=api_auth).json
    assert detail["evidence"] == [{"n": 1, "score": 0.2, "withheld": True}]
    assert SECRET_EXCERPT not in json.dumps(detail)
    listing = mod_client.get("/v1/moderation/retrievals", headers=api_auth).json
    assert listing["items"][0]["top_title"] is None and listing["items"][0]["evidence_count"] == 1
    html_list = mod_client.get("/moderation/").get_data(as_text=True)
    assert title not in html_list
