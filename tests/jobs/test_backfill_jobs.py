"""Backfill runs through RQ on real Redis and PostgreSQL, worked by an in-process SimpleWorker."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from jobs import driver
from jobs.batch import run_sync
from jobs.queues import all_queues
from models import DummyEmbedder
from sidecar.db.owner import IndexBuild, upgrade_as_owner
from sidecar.db.vector_index import index_name
from sidecar.runtime.resources import Resources
from tests.conftest import owner_url
from tests.jobs.conftest import (
    private_post_ids,
    public_post_ids,
    run_record,
    vector_rows,
    work,
)


def _assert_consistent(run: Any) -> None:
    assert (run.done + run.skipped_unchanged + run.skipped_gone + run.failed + run.remaining
            == run.budgeted)


def _index_exists(url: str, name: str) -> bool:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT i.indisvalid FROM pg_class c JOIN pg_index i"
                           " ON i.indexrelid = c.oid WHERE c.relname = %s", (name,)).fetchone()
    return bool(row and row[0])


def test_a_queued_run_embeds_every_public_post_once_then_builds_the_index(
    dummy_res: Resources,
) -> None:
    demo_res = dummy_res
    url = owner_url(demo_res.urls.database_url)
    public, private = public_post_ids(url), private_post_ids(url)
    assert public and private
    run = driver.start_run(demo_res)
    assert run.status == "planning"
    assert work(demo_res)

    run = run_record(demo_res, run.id)
    assert (run.status, run.stop_reason) == ("finished", "done")
    assert run.phase_missing == run.budgeted == run.done == len(public)
    assert run.remaining == run.failed == run.skipped_unchanged == 0
    _assert_consistent(run)
    rows = vector_rows(url, demo_res.model.id)
    assert [pid for pid, _ in rows] == sorted(public)  # one row each, none private
    assert not {pid for pid, _ in rows} & private
    name = index_name(demo_res.model.id, 1, "halfvec")
    # ai_posts_embeddings is in the forum's schema, where the role may create nothing (not even
    # an index): the run says its owner builds it, and the owner does.
    assert run.index_status and run.index_status.startswith("waiting for the table's owner")
    assert not _index_exists(url, name)
    upgrade_as_owner(url, "sidecar", IndexBuild())
    assert _index_exists(url, name)
    # Nothing failed or is left behind in the queues.
    for q in all_queues(demo_res.redis, demo_res.settings):
        assert q.count == 0 and q.failed_job_registry.count == 0

    # A second run finds nothing to do and says so.
    again = driver.start_run(demo_res)
    work(demo_res)
    again = run_record(demo_res, again.id)
    assert (again.status, again.stop_reason, again.budgeted) == ("finished", "done", 0)
    assert again.index_status == f"present: {name}"


def test_batches_go_newest_topic_first(dummy_res: Resources) -> None:
    demo_res = dummy_res
    url = owner_url(demo_res.urls.database_url)
    run = driver.start_run(demo_res, budget=5)
    from jobs.planner import plan_run

    plan_run(demo_res, run.id)
    with psycopg.connect(url) as conn:
        planned = conn.execute("SELECT post_ids FROM sidecar.sidecar_backfill_batches"
                               " WHERE run_id = %s"
                               " ORDER BY seq", (run.id,)).fetchone()
        newest = conn.execute(
            "SELECT p.id FROM posts p JOIN topics t ON t.id = p.topic_id"
            " WHERE p.id = ANY(%s) ORDER BY t.bumped_at DESC, t.id DESC, p.post_number LIMIT 5",
            (sorted(public_post_ids(url)),)).fetchall()
    assert planned is not None and planned[0] == [r[0] for r in newest]


def test_budget_stops_the_run_and_the_next_run_takes_the_rest(dummy_res: Resources) -> None:
    demo_res = dummy_res
    url = owner_url(demo_res.urls.database_url)
    public = public_post_ids(url)
    first = driver.start_run(demo_res, budget=40)
    work(demo_res)
    first = run_record(demo_res, first.id)
    assert (first.status, first.stop_reason) == ("finished", "budget")
    assert first.budgeted == first.done == 40
    assert first.not_planned == len(public) - 40
    _assert_consistent(first)
    assert len(vector_rows(url, demo_res.model.id)) == 40
    assert first.index_status is None  # not complete: no index yet

    second = driver.start_run(demo_res)
    work(demo_res)
    second = run_record(demo_res, second.id)
    assert (second.stop_reason, second.done) == ("done", len(public) - 40)
    assert [p for p, _ in vector_rows(url, demo_res.model.id)] == sorted(public)


def test_a_run_past_its_deadline_takes_no_more_batches(dummy_res: Resources) -> None:
    run = driver.start_run(dummy_res)
    from jobs.planner import plan_run

    plan_run(dummy_res, run.id)
    driver.pump(dummy_res, run.id)  # a window of batches is queued before the deadline
    with dummy_res.db.connection() as conn:
        conn.execute("UPDATE sidecar.sidecar_backfill_runs SET deadline = %s WHERE id = %s",
                     (datetime.now(UTC) - timedelta(seconds=1), run.id))
    work(dummy_res)
    run = run_record(dummy_res, run.id)
    assert (run.status, run.stop_reason) == ("finished", "deadline")
    assert run.done == 0 and run.remaining == run.budgeted > 0
    assert vector_rows(owner_url(dummy_res.urls.database_url), dummy_res.model.id) == []
    with dummy_res.db.connection() as conn:
        states = {r["state"] for r in conn.execute(
            "SELECT state FROM sidecar.sidecar_backfill_batches WHERE run_id = %s", (run.id,))}
    assert states == {"pending"}  # nothing half-taken: the next run plans them again


def test_drift_sweep_enqueues_only_changed_posts_and_remembers_unchanged_ones(
    dummy_res: Resources,
) -> None:
    url = owner_url(dummy_res.urls.database_url)
    base = run_sync(dummy_res, driver.start_run(dummy_res, enqueue=False).id)
    assert base.stop_reason == "done" and base.done > 20
    before = dict(vector_rows(url, dummy_res.model.id))
    with psycopg.connect(url) as conn:
        topic = conn.execute("SELECT p.topic_id FROM posts p WHERE p.id = %s",
                             (min(before),)).fetchone()
        assert topic is not None
        touched = {r[0] for r in conn.execute(
            "SELECT id FROM posts WHERE topic_id = %s", topic)} & set(before)
        edited = min(touched)
        # As if the forum was imported 2 hours ago and embedded 1 hour ago; 30 minutes
        # ago the whole topic was touched (as a retag that changes nothing would) and one
        # of its posts really edited.
        conn.execute("UPDATE sidecar.sidecar_embedding_checks SET checked_at = checked_at"
                     " - interval '1 hour'")
        for table in ("posts", "topics", "categories"):
            conn.execute(f"UPDATE {table} SET updated_at = updated_at - interval '2 hours'")
        conn.execute("UPDATE topics SET updated_at = now() AT TIME ZONE 'utc'"
                     " - interval '30 minutes' WHERE id = %s", topic)
        conn.execute("UPDATE posts SET cooked = cooked || '<p>Edit: solved with a "
                     "firmware update.</p>', updated_at = now() AT TIME ZONE 'utc'"
                     " - interval '30 minutes' WHERE id = %s", (edited,))
    sweep = run_sync(dummy_res, driver.start_run(dummy_res, enqueue=False).id)
    assert sweep.phase_drift == len(touched)
    assert sweep.swept_unchanged == len(touched) - 1
    assert sweep.budgeted == sweep.done == 1
    after = dict(vector_rows(url, dummy_res.model.id))
    assert {p for p in after if after[p] != before[p]} == {edited}

    # Checked and unchanged: not selected again.
    quiet = run_sync(dummy_res, driver.start_run(dummy_res, enqueue=False).id)
    assert (quiet.phase_drift, quiet.budgeted, quiet.stop_reason) == (0, 0, "done")


def test_the_backfill_removes_vectors_of_posts_no_longer_public_whatever_the_events(
    indexed: Resources, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No event said so (a lost webhook, a hint read from a lagging replica): a post deleted,
    one hidden and a topic moved to a private message keep their vectors until the next
    backfill, which removes them in bounded batches and says how many."""
    from jobs import planner

    url = owner_url(indexed.urls.database_url)  # the forum writes; the sidecar only reads
    before = {p for p, _ in vector_rows(url, indexed.model.id)}
    with psycopg.connect(url) as conn:
        deleted, hidden = sorted(before)[:2]
        conn.execute("UPDATE posts SET deleted_at = now() WHERE id = %s", (deleted,))
        conn.execute("UPDATE posts SET hidden = true WHERE id = %s", (hidden,))
        row = conn.execute("SELECT topic_id FROM posts WHERE id = %s",
                           (max(before),)).fetchone()
        assert row is not None
        conn.execute("UPDATE topics SET archetype = 'private_message', category_id = NULL"
                     " WHERE id = %s", row)
        moved = {r[0] for r in conn.execute("SELECT id FROM posts WHERE topic_id = %s", row)}
    gone = {deleted, hidden} | (moved & before)
    # Several batches on the demo forum.
    monkeypatch.setattr(planner, "NOT_PUBLIC_BATCH", 40, raising=False)
    assert len(before) > 3 * 40
    run = run_sync(indexed, driver.start_run(indexed, enqueue=False).id)
    assert {p for p, _ in vector_rows(url, indexed.model.id)} == before - gone
    assert run.removed_not_public == len(gone)
    again = run_sync(indexed, driver.start_run(indexed, enqueue=False).id)
    assert again.removed_not_public == 0


def test_a_new_model_version_re_embeds_older_rows_after_missing_ones(
    dummy_res: Resources,
) -> None:
    url = owner_url(dummy_res.urls.database_url)
    run_sync(dummy_res, driver.start_run(dummy_res, enqueue=False).id)
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE ai_posts_embeddings SET model_version = 0 WHERE post_id IN"
                     " (SELECT post_id FROM ai_posts_embeddings ORDER BY post_id LIMIT 7)")
        conn.execute("DELETE FROM ai_posts_embeddings WHERE post_id IN (SELECT post_id"
                     " FROM ai_posts_embeddings ORDER BY post_id DESC LIMIT 3)")
    run = run_sync(dummy_res, driver.start_run(dummy_res, enqueue=False).id)
    assert (run.phase_missing, run.phase_outdated, run.done) == (3, 7, 10)
    with psycopg.connect(url) as conn:
        phases = [r[0] for r in conn.execute(
            "SELECT phase FROM sidecar.sidecar_backfill_batches WHERE run_id = %s ORDER BY seq",
            (run.id,))]
        versions = conn.execute("SELECT min(model_version) FROM ai_posts_embeddings"
                                ).fetchone()
    assert phases == ["missing", "outdated"]
    assert versions is not None and versions[0] == dummy_res.model.version


@pytest.mark.parametrize("kind", ["halfvec", "binary"])
def test_strategy_two_beside_strategy_one_and_search_picks_either(
    tmp_path: Any, db_url: str, redis_client: Any, redis_url: str, kind: str,
) -> None:
    from sidecar.search.service import SearchOptions
    from tests.jobs.conftest import start_state

    res = start_state(tmp_path, db_url, redis_url, DummyEmbedder(dimensions=32),
                      index_kind=kind, backfill_batch_size=64)
    try:
        url = owner_url(res.urls.database_url)
        for strategy in (1, 2):
            driver.start_run(res, strategy=strategy)
            work(res)
        public = sorted(public_post_ids(url))
        one, two = vector_rows(url, res.model.id, 1), vector_rows(url, res.model.id, 2)
        assert [p for p, _ in one] == [p for p, _ in two] == public
        # Replies embed other text under strategy 2 (title, opening post, parent excerpts).
        assert sum(d1 != d2 for (_, d1), (_, d2) in zip(one, two, strict=True)) > len(public) / 2
        upgrade_as_owner(url, "sidecar", IndexBuild(kind=kind))  # the owner builds both
        for strategy in (1, 2):
            assert _index_exists(url, index_name(res.model.id, strategy, kind))
            results, trace = res.search.search("ZFS scrub checksum errors", 3,
                                               SearchOptions(strategy=strategy))
            assert results, trace.as_list()
            semantic = next(s for s in trace.as_list() if s["step"] == "semantic")
            assert semantic["detail"]["strategy"] == strategy
            assert semantic["detail"]["index"] == kind
    finally:
        res.close()
