"""A model provider that fails: retries with backoff, pauses on terminal errors, resumes.

The stand-in is the MODEL (``FailingEmbedder``, shaped like ``models.client``'s errors); the
database and the queue are real.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from jobs import driver
from jobs.batch import run_sync
from jobs.queues import queue
from jobs.runs import change_status
from models import DummyEmbedder
from tests.conftest import owner_url
from tests.jobs.conftest import (
    FailingEmbedder,
    public_post_ids,
    run_record,
    start_state,
    vector_rows,
    work,
)


def _state(tmp_path: Path, db_url: str, redis_url: str, embedder: Any, **settings: Any) -> Any:
    return start_state(tmp_path, db_url, redis_url, embedder, **settings)


def test_terminal_errors_pause_the_run_then_resume_finishes_it(
    tmp_path: Path, db_url: str, redis_client: Any, redis_url: str,
) -> None:
    healthy = DummyEmbedder(dimensions=32)
    failing = FailingEmbedder(healthy, status=401, terminal=True)
    res = _state(tmp_path, db_url, redis_url, failing)
    try:
        run = driver.start_run(res)
        work(res)
        run = run_record(res, run.id)
        pause_after = res.settings.backfill_pause_after_errors
        assert (run.status, run.stop_reason) == ("paused", "error")
        assert "401" in (run.pause_reason or "") and "sidecar backfill resume" in (
            run.pause_reason or "")
        # It stopped at the threshold instead of burning through every batch.
        assert failing.calls == pause_after
        assert run.done == run.failed == 0 and run.remaining == run.budgeted > 0
        assert vector_rows(owner_url(res.urls.database_url), res.model.id) == []

        # The key is fixed; the operator resumes.
        res.loaded_models().embedder = healthy
        with res.db.connection() as conn:
            change_status(conn, run.id, "resume")
        driver.reconcile(res, run.id)
        work(res)
        run = run_record(res, run.id)
        assert (run.status, run.stop_reason, run.failed) == ("finished", "done", 0)
        assert run.done == run.budgeted == len(public_post_ids(owner_url(res.urls.database_url)))
        assert run.consecutive_errors == 0
    finally:
        res.close()


def test_transient_errors_are_retried_and_the_run_completes(
    tmp_path: Path, db_url: str, redis_client: Any, redis_url: str,
) -> None:
    failing = FailingEmbedder(DummyEmbedder(dimensions=32), status=503, terminal=False,
                              fail_times=2)
    res = _state(tmp_path, db_url, redis_url, failing)
    try:
        run = driver.start_run(res)
        work(res)
        run = run_record(res, run.id)
        assert (run.status, run.stop_reason) == ("finished", "done")
        assert run.failed == 0 and run.done == run.budgeted
        batches = -(-run.budgeted // res.settings.backfill_batch_size)
        assert failing.calls == batches + 2  # every batch once, the two failed ones again
        assert "503" in (run.last_error or "")
        assert queue(res.redis, res.settings, "backfill").failed_job_registry.count == 0
    finally:
        res.close()


def test_a_provider_down_for_good_fails_batches_into_rqs_failed_registry_then_pauses(
    tmp_path: Path, db_url: str, redis_client: Any, redis_url: str,
) -> None:
    failing = FailingEmbedder(DummyEmbedder(dimensions=32), status=503, terminal=False)
    res = _state(tmp_path, db_url, redis_url, failing, job_retries=1)
    try:
        run = driver.start_run(res)
        work(res)
        run = run_record(res, run.id)
        pause_after = res.settings.backfill_pause_after_errors
        size = res.settings.backfill_batch_size
        assert (run.status, run.stop_reason) == ("paused", "error")
        assert run.failed == pause_after * size  # each batch: one try, one retry, given up
        # The window of batches in flight was tried once each; the retries of the first ones
        # then failed for good until the pause: nothing beyond the window was taken.
        batches = -(-run.budgeted // size)
        assert failing.calls == min(driver.WINDOW, batches) + pause_after
        assert run.remaining == run.budgeted - run.failed
        failed = queue(res.redis, res.settings, "backfill").failed_job_registry
        assert failed.count == pause_after
        for job_id in failed.get_job_ids():
            job = failed.get_queue().fetch_job(job_id)
            assert job is not None
            result = job.latest_result()
            assert result is not None and "model host answered 503" in (result.exc_string or "")
    finally:
        res.close()


def test_retry_backoff_goes_through_the_scheduler(
    tmp_path: Path, db_url: str, redis_client: Any, redis_url: str,
) -> None:
    failing = FailingEmbedder(DummyEmbedder(dimensions=32), status=429, terminal=False,
                              fail_times=1)
    res = _state(tmp_path, db_url, redis_url, failing, job_retry_intervals="1")
    try:
        run = driver.start_run(res)
        backfill = queue(res.redis, res.settings, "backfill")
        deadline = time.monotonic() + 30
        while run_record(res, run.id).status != "finished" and time.monotonic() < deadline:
            work(res)  # a burst ends while the failed batch waits out its backoff
            time.sleep(0.3)
        run = run_record(res, run.id)
        assert (run.stop_reason, run.failed, run.done) == ("done", 0, run.budgeted)
        assert backfill.scheduled_job_registry.count == 0
    finally:
        res.close()


def test_sync_backfill_pauses_on_terminal_errors_too(
    tmp_path: Path, db_url: str, redis_client: Any, redis_url: str,
) -> None:
    failing = FailingEmbedder(DummyEmbedder(dimensions=32), status=403, terminal=True)
    res = _state(tmp_path, db_url, redis_url, failing)
    try:
        run = run_sync(res, driver.start_run(res, enqueue=False).id)
        pause_after = res.settings.backfill_pause_after_errors
        assert (run.status, run.stop_reason) == ("paused", "error")
        # No retries in-process: the batches before the pause are counted as failed.
        assert run.failed == (pause_after - 1) * res.settings.backfill_batch_size
        assert failing.calls == pause_after
    finally:
        res.close()
