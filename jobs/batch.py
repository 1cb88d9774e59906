"""One backfill batch: take it (or not), embed it, count it once; and the in-process loop.

The same :func:`execute_batch` runs inside an RQ job (``jobs.tasks.backfill_batch``) and in
``sidecar backfill --sync``, so both paths count, pause and stop identically.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from jobs import backoff, driver, planner
from jobs.errors import Failure, classify, describe
from sidecar.db.backfill_batches import (
    fail_batch,
    first_pending,
    get_batch,
    record_error,
    release_batch,
    settle_batch,
)
from sidecar.db.backfill_runs import Run, RunStatus, StopReason, get_run, stop_run
from sidecar.db.pool import DictConn
from sidecar.errors import NotFound
from sidecar.ingest.indexing import BatchResult
from sidecar.runtime.resources import Resources

log = logging.getLogger(__name__)


class OutcomeStatus(StrEnum):
    """What became of one execution of a batch (the job's returned ``status``)."""

    SETTLED = "settled"  # embedded and counted by this execution
    ALREADY = "already"  # settled before (a re-run): nothing counted
    SKIPPED = "skipped"  # the run takes no batches now: back to pending


@dataclass
class Outcome:
    """What one execution of a batch did."""

    status: OutcomeStatus
    detail: str = ""
    result: BatchResult | None = None

    def as_dict(self) -> dict[str, Any]:
        """The job's return value (kept in rq's registry for a day)."""
        data: dict[str, Any] = {"status": self.status.value, "detail": self.detail}
        if self.result is not None:
            data.update(embedded=self.result.embedded, unchanged=self.result.unchanged,
                        gone=self.result.missing)
        return data


def execute_batch(res: Resources, run_id: int, seq: int, *, job_id: str | None) -> Outcome:
    """Embed batch ``seq`` of run ``run_id`` if the run still takes batches.

    A run that is paused, stopped or past its deadline does not take the batch: it goes back to
    pending (a resumed run enqueues it again). Errors are recorded on the run (terminal provider
    errors count towards pausing it) and raised, so RQ retries the job with backoff. First the
    batch waits while the forum's database is busy (:mod:`jobs.backoff`).
    """
    quiet(res, run_id)
    with res.db.connection() as conn:
        run = get_run(conn, run_id)
        batch = get_batch(conn, run_id, seq)
        if batch is None:
            raise NotFound(f"run #{run_id} has no batch {seq}")
        if batch.state.settled:
            return Outcome(OutcomeStatus.ALREADY, f"batch already {batch.state}")
        if run.status != RunStatus.RUNNING:
            release_batch(conn, run_id, seq, job_id)
            return Outcome(OutcomeStatus.SKIPPED, f"run #{run_id} is {run.status}")
        if run.deadline is not None and datetime.now(UTC) >= run.deadline:
            stop_run(conn, run_id, StopReason.DEADLINE)
            return Outcome(OutcomeStatus.SKIPPED, f"run #{run_id} reached its deadline")
    indexer = res.indexer(res.model_by_id(run.model_id), run.strategy_id)
    settled: list[bool] = []

    def count(conn: DictConn, result: BatchResult) -> None:
        settled.append(settle_batch(conn, run_id, seq, embedded=result.embedded,
                                    unchanged=result.unchanged, gone=result.missing,
                                    gone_ids=result.gone_ids))

    try:
        result = indexer.embed_posts([int(i) for i in batch.post_ids], on_write=count)
    except Exception as exc:
        failure = classify(exc)
        with res.db.connection() as conn:
            paused = record_error(conn, run_id, describe(exc),
                                  counts=failure is Failure.TERMINAL,
                                  pause_after=res.settings.backfill_pause_after_errors)
        if paused:
            log.error("run #%d paused after repeated provider errors: %s", run_id, describe(exc))
        raise
    return Outcome(OutcomeStatus.SETTLED if settled and settled[0] else OutcomeStatus.ALREADY,
                   result=result)


def quiet(res: Resources, run_id: int) -> None:
    """Wait while the forum's database is busy; a wait too long is recorded and raised."""
    try:
        backoff.wait_until_quiet(res, run_id)
    except backoff.DatabaseBusy as exc:
        with res.db.connection() as conn:
            record_error(conn, run_id, describe(exc), counts=False,
                         pause_after=res.settings.backfill_pause_after_errors)
        raise


def give_up_batch(res: Resources, run_id: int, seq: int, exc: BaseException | None,
                  job_id: str | None) -> None:
    """A batch whose retries are spent: failed (and counted), or back to pending if paused."""
    message = describe(exc) if exc is not None else "gave up"
    with res.db.connection() as conn:
        run = get_run(conn, run_id, lock=True)
        if run.status != RunStatus.RUNNING:
            release_batch(conn, run_id, seq, job_id)
            return
        if fail_batch(conn, run_id, seq, message):
            # Terminal errors were counted when raised; the others count once given up, but a
            # busy database is the forum's business, never a reason to pause the run.
            counts = exc is None or (classify(exc) is not Failure.TERMINAL
                                     and not isinstance(exc, backoff.DatabaseBusy))
            record_error(conn, run_id, message, counts=counts,
                         pause_after=res.settings.backfill_pause_after_errors)


def run_sync(res: Resources, run_id: int,
             on_progress: Callable[[Run], None] | None = None) -> Run:
    """``sidecar backfill --sync``: plan and work a run in this process, no queue.

    No retries here: a batch that raises is recorded as failed (terminal provider errors still
    pause the run, which ends the loop). The index is built in-process at the end.
    """
    run = planner.plan_run(res, run_id)
    if on_progress:
        on_progress(run)
    while run.status == RunStatus.RUNNING:
        with res.db.connection() as conn:
            seq = first_pending(conn, run_id)
        if seq is None:
            break
        try:
            execute_batch(res, run_id, seq, job_id=None)
        except Exception as exc:
            log.error("run #%d batch %d failed: %s", run_id, seq, describe(exc))
            give_up_batch(res, run_id, seq, exc, None)
        with res.db.connection() as conn:
            run = get_run(conn, run_id)
        if on_progress:
            on_progress(run)
    finished = driver.finish_if_done(res, run_id, inline=True)
    if finished is None and run.status == RunStatus.FINISHED:
        driver.on_finished(res, run, inline=True)
    with res.db.connection() as conn:
        return get_run(conn, run_id)
