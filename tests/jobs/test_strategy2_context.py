"""Strategy 2's context excerpts: the same public rule as everything else, and kept current.

A reply's enriched text holds excerpts of the opening post and of the post it replies to. Those
excerpts must come only from public posts (no whisper, no post its author deleted), and a reply
must be re-embedded when its parent or opening post is deleted, hidden or edited: through the
index events, and through the drift phase of the backfill (Discourse's trash does not bump
``updated_at``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from jobs import driver
from jobs.batch import run_sync
from sidecar.db.forum_read import post_sources
from sidecar.db.stale import stale_candidates
from sidecar.runtime.resources import Resources
from tests.conftest import API_KEY, owner_url
from tests.jobs.conftest import public_post_ids, vector_rows, work

AUTH = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture
def indexed2(dummy_res: Resources) -> Iterator[Resources]:
    """The demo forum embedded with strategy 2 (strategy 1 is the serving one, empty)."""
    run = run_sync(dummy_res, driver.start_run(dummy_res, strategy=2, enqueue=False).id)
    assert run.stop_reason == "done"
    yield dummy_res


def _sql(res: Resources, query: str, *params: Any) -> list[Any]:
    with psycopg.connect(owner_url(res.urls.database_url)) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def _reply_with_parent(res: Resources) -> tuple[int, int, int]:
    """(reply id, parent id, opening post id): a public reply to a public post other than the
    opening post, in a topic whose opening post is public."""
    public = public_post_ids(owner_url(res.urls.database_url))
    rows = _sql(res, """
        SELECT r.id, par.id, op.id FROM posts r
        JOIN posts par ON par.topic_id = r.topic_id AND par.post_number = r.reply_to_post_number
        JOIN posts op ON op.topic_id = r.topic_id AND op.post_number = 1
        WHERE par.post_number > 1 ORDER BY r.id""")
    for reply, parent, opening in rows:
        if {reply, parent, opening} <= public:
            return reply, parent, opening
    raise AssertionError("the demo forum has no public reply to a public reply")


def _sources(res: Resources, post_id: int) -> Any:
    with res.db.connection() as conn:
        (source,) = post_sources(conn, [post_id])
    return source


@pytest.mark.parametrize("change", ["post_type = 4", "user_deleted = true"])
def test_excerpts_come_only_from_public_posts(dummy_res: Resources, change: str) -> None:
    reply, parent, opening = _reply_with_parent(dummy_res)
    before = _sources(dummy_res, reply)
    assert before.opening_text and before.parent_text
    _sql(dummy_res, f"UPDATE posts SET {change} WHERE id IN (%s, %s)",  # type: ignore[str-format]
         opening, parent)
    after = _sources(dummy_res, reply)
    assert after.opening_text is None and after.parent_text is None


def _digest2(res: Resources, post_id: int) -> str | None:
    return dict(vector_rows(owner_url(res.urls.database_url), res.model.id, 2)).get(post_id)


@pytest.mark.parametrize(("event", "change"), [
    ("post_deleted", "deleted_at = now() AT TIME ZONE 'utc'"),  # the trash: updated_at stays
    ("post_hidden", "hidden = true, hidden_at = now() AT TIME ZONE 'utc'"),
    ("post_edited", "cooked = '<p>Rewritten: the parent now says something else.</p>', "
                    "updated_at = now() AT TIME ZONE 'utc'"),
])
def test_a_change_to_the_parent_re_embeds_its_replies(
    indexed2: Resources, event: str, change: str
) -> None:
    from sidecar.api.app import create_app

    api = create_app(indexed2.settings, indexed2).test_client()
    reply, parent, _ = _reply_with_parent(indexed2)
    before = _digest2(indexed2, reply)
    assert before is not None
    _sql(indexed2, f"UPDATE posts SET {change} WHERE id = %s", parent)  # type: ignore[str-format]
    resp = api.post("/v1/index/events", json={"event": event, "ids": [parent]}, headers=AUTH)
    assert resp.status_code == 202, resp.json
    assert resp.json["queued_posts"] >= 1
    work(indexed2)
    after = _digest2(indexed2, reply)
    assert after is not None and after != before


def test_an_edited_opening_post_re_embeds_the_replies_of_its_topic(indexed2: Resources) -> None:
    from sidecar.api.app import create_app

    api = create_app(indexed2.settings, indexed2).test_client()
    reply, _, opening = _reply_with_parent(indexed2)
    before = _digest2(indexed2, reply)
    _sql(indexed2, "UPDATE posts SET cooked = '<p>A new opening.</p>',"
                   " updated_at = now() AT TIME ZONE 'utc' WHERE id = %s", opening)
    resp = api.post("/v1/index/events", json={"event": "post_edited", "ids": [opening]},
                    headers=AUTH)
    assert resp.status_code == 202
    work(indexed2)
    assert _digest2(indexed2, reply) not in (None, before)


@pytest.mark.parametrize("change", [
    "deleted_at = now() AT TIME ZONE 'utc'",
    "hidden = true, hidden_at = now() AT TIME ZONE 'utc'",
])
def test_the_drift_phase_notices_a_trashed_or_hidden_parent(
    indexed2: Resources, change: str
) -> None:
    reply, parent, _ = _reply_with_parent(indexed2)
    # Settle the checks (they carry a margin for clock skew that still covers the import).
    _sql(indexed2, "UPDATE sidecar.sidecar_embedding_checks"
                   " SET checked_at = now() AT TIME ZONE 'utc'")
    with indexed2.db.connection() as conn:
        assert reply not in {c.post_id for c in stale_candidates(
            conn, indexed2.model, 2, 1, phases=["drift"])}
    _sql(indexed2, f"UPDATE posts SET {change} WHERE id = %s", parent)  # type: ignore[str-format]
    with indexed2.db.connection() as conn:
        drift = stale_candidates(conn, indexed2.model, 2, 1, phases=["drift"])
    assert reply in {c.post_id for c in drift}
