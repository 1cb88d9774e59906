"""Who drives a run: a window of batch jobs in Redis, topped up as each batch finishes.

The plan lives in PostgreSQL; Redis holds at most ``WINDOW`` batch jobs of a run at a time.
Each batch job, once its counts are committed, enqueues the next pending batches ("pumps"), so
a run keeps going with no process of its own, stops taking batches the moment it is paused,
stopped or past its deadline, and resumes by pumping again. Anything lost on the Redis side (a
worker killed mid-batch, a flushed Redis) is found by :func:`reconcile`: a batch whose job is no
longer alive goes back to pending and is enqueued again. Settling is idempotent, so a batch run
twice counts once.
"""

from __future__ import annotations

import logging
import uuid
from datetime import UTC, datetime
from typing import Any

from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from jobs import backoff, queues
from jobs.runs import create_run
from sidecar.core.strategy import STRATEGY_VERSIONS
from sidecar.db.backfill_batches import (
    count_queued,
    mark_queued,
    pending_seqs,
    queued_batches,
    release_batch,
)
from sidecar.db.backfill_runs import (
    Run,
    RunStatus,
    StopReason,
    delete_run,
    get_run,
    list_runs,
    live_run,
    set_index_status,
    set_plan_job,
    stop_run,
    try_finish,
)
from sidecar.db.embeddings import RegisteredModel, analyze_embeddings, registered_model
from sidecar.db.vector_index import ensure_index, index_name
from sidecar.errors import InvalidInput, OwnerRequired
from sidecar.runtime.resources import Resources

log = logging.getLogger(__name__)

# Batch jobs of one run in Redis at once: enough to keep several workers busy, few enough that a
# pause takes effect within a handful of batches.
WINDOW = 8
ALIVE = {JobStatus.QUEUED, JobStatus.STARTED, JobStatus.SCHEDULED, JobStatus.DEFERRED}


def _job_id(res: Resources, what: str, *parts: int) -> str:
    # Unique per enqueue: a batch enqueued again gets a new job, so rq's registries keep the
    # history of the old one (its failure reason) instead of overwriting it.
    return "-".join([res.settings.queue_prefix, what, *map(str, parts), uuid.uuid4().hex[:8]])


def start_run(
    res: Resources,
    *,
    model: RegisteredModel | None = None,
    strategy: int | None = None,
    budget: int | None = None,
    deadline: datetime | None = None,
    enqueue: bool = True,
) -> Run:
    """Record a run and enqueue its planning (``enqueue=False``: the caller plans in-process)."""
    strategy = strategy or res.settings.strategy
    if strategy not in STRATEGY_VERSIONS:
        raise InvalidInput(f"unknown strategy {strategy}; known: {sorted(STRATEGY_VERSIONS)}")
    model = model or res.model
    with res.db.connection() as conn:
        live = live_run(conn, model.id, strategy)
        if live is not None and live.deadline is not None and datetime.now(UTC) >= live.deadline:
            # Last night's run, past its deadline but never told so (no worker was running
            # when the time came): it is over.
            stop_run(conn, live.id, StopReason.DEADLINE)
    with res.db.connection() as conn:
        run = create_run(conn, model, strategy, STRATEGY_VERSIONS[strategy],
                         batch_size=res.settings.backfill_batch_size, budget=budget,
                         deadline=deadline)
    if enqueue:
        try:
            enqueue_plan(res, run.id)
        except Exception:
            # No queue, no run: a live run nobody can plan would block the next attempt.
            with res.db.connection() as conn:
                delete_run(conn, run.id)
            raise
    return run


def enqueue_plan(res: Resources, run_id: int) -> str:
    """Enqueue the planning job of a run in ``planning``."""
    job_id = _job_id(res, "plan", run_id)
    with res.db.connection() as conn:
        set_plan_job(conn, run_id, job_id)
        queues.enqueue(res.redis, res.settings, queues.BACKFILL, "jobs.tasks.plan_run", run_id,
                       job_id=job_id, description=f"plan backfill run #{run_id}",
                       on_failure="jobs.tasks.on_plan_failure")
    return job_id


def pump(res: Resources, run_id: int) -> int:
    """Enqueue pending batches of a running run up to the window. Returns how many."""
    with res.db.connection() as conn:
        run = get_run(conn, run_id, lock=True)  # serializes concurrent pumps of one run
        if run.status != RunStatus.RUNNING:
            return 0
        if run.deadline is not None and datetime.now(UTC) >= run.deadline:
            stop_run(conn, run_id, StopReason.DEADLINE)
            log.info("run #%d reached its deadline %s: no more batches", run_id, run.deadline)
            return 0
        free = WINDOW - count_queued(conn, run_id)
        if free <= 0:
            return 0
        seqs = pending_seqs(conn, run_id, free)
        if not seqs:
            return 0
        with res.redis.pipeline() as pipe:
            for seq in seqs:
                job_id = _job_id(res, "batch", run_id, seq)
                mark_queued(conn, run_id, seq, job_id)
                queues.enqueue(res.redis, res.settings, queues.BACKFILL,
                               "jobs.tasks.backfill_batch", run_id, seq, job_id=job_id,
                               description=f"backfill run #{run_id} batch {seq}",
                               on_failure="jobs.tasks.on_batch_failure", pipeline=pipe)
            # Redis first, then the commit: a crash in between leaves a job for a batch still
            # marked pending, which is harmless (settling is idempotent), never the reverse.
            pipe.execute()
    return len(seqs)


def _alive(res: Resources, job_ids: list[str]) -> dict[str, bool]:
    jobs = Job.fetch_many(job_ids, connection=res.redis) if job_ids else []
    alive: dict[str, bool] = {}
    for job_id, job in zip(job_ids, jobs, strict=True):
        try:
            alive[job_id] = job is not None and job.get_status(refresh=False) in ALIVE
        except NoSuchJobError:
            alive[job_id] = False
    return alive


def reconcile(res: Resources, run_id: int | None = None) -> dict[str, Any]:
    """Re-enqueue what Redis lost for live runs; finish runs whose batches are all settled."""
    with res.db.connection() as conn:
        runs = [get_run(conn, run_id)] if run_id is not None else list_runs(
            conn, limit=100, live_only=True)
    summary: dict[str, Any] = {"released": 0, "enqueued": 0, "replanned": 0}
    for run in runs:
        if run.status == RunStatus.PLANNING:
            if not run.plan_job_id or not _alive(res, [run.plan_job_id])[run.plan_job_id]:
                enqueue_plan(res, run.id)
                summary["replanned"] += 1
            continue
        if run.status != RunStatus.RUNNING:
            continue
        with res.db.connection() as conn:
            held = queued_batches(conn, run.id)
        alive = _alive(res, [b.job_id for b in held if b.job_id])
        for b in held:
            if not b.job_id or not alive.get(b.job_id, False):
                with res.db.connection() as conn:
                    release_batch(conn, run.id, b.seq, b.job_id)
                summary["released"] += 1
        summary["enqueued"] += pump(res, run.id)
        finish_if_done(res, run.id)
    if summary["released"] or summary["replanned"]:
        log.warning("reconciled backfill runs: %s", summary)
    return summary


def finish_if_done(res: Resources, run_id: int, *, inline: bool = False) -> Run | None:
    """Finish the run if every batch is settled; then build its index (job, or ``inline``)."""
    with res.db.connection() as conn:
        run = try_finish(conn, run_id)
    if run is not None:
        log.info("run #%d finished (%s): %d embedded, %d unchanged, %d gone, %d failed",
                 run.id, run.stop_reason, run.done, run.skipped_unchanged, run.skipped_gone,
                 run.failed)
        on_finished(res, run, inline=inline)
    return run


def on_finished(res: Resources, run: Run, *, inline: bool = False) -> None:
    """A run that completed (nothing left) gets its HNSW index; partial runs wait for the last."""
    if run.stop_reason != StopReason.DONE:
        return
    if inline:
        build_index(res, run.id)
        return
    with res.db.connection() as conn:
        set_index_status(conn, run.id, "queued")
    queues.enqueue(res.redis, res.settings, queues.BACKFILL, "jobs.tasks.build_index", run.id,
                   job_id=_job_id(res, "index", run.id),
                   description=f"HNSW index after backfill run #{run.id}")


def build_index(res: Resources, run_id: int) -> str:
    """ANALYZE, then ``CREATE INDEX CONCURRENTLY`` of the run's (model, strategy) if missing.

    Search keeps working meanwhile (an exact scan over the partial rows); writes are not
    blocked. The kind (halfvec cosine or binary-quantized) is ``SIDECAR_INDEX_KIND``. The build
    waits while the forum's database is busy, and where discourse-ai owns the table the run
    says that its owner builds the index (``sidecar db upgrade --as-owner``).
    """
    with res.db.connection() as conn:
        run = get_run(conn, run_id)
        model = registered_model(conn, run.model_id)
    kind = res.settings.index_kind
    name = index_name(model.id, run.strategy_id, kind)
    try:
        backoff.wait_until_quiet(res, run_id)
        with res.db.connection() as conn:
            analyze_embeddings(conn)
        built = ensure_index(res.conninfo("index"), model, run.strategy_id, kind,
                             **res.settings.hnsw_build())
    except OwnerRequired as exc:
        status = f"waiting for the table's owner: {exc.message}"
        log.warning("run #%d: %s", run_id, status)
        with res.db.connection() as conn:
            set_index_status(conn, run_id, status)
        return status
    except Exception as exc:
        with res.db.connection() as conn:
            set_index_status(conn, run_id, f"error: {type(exc).__name__}: {exc}")
        raise
    status = f"{'built' if built else 'present'}: {name}"
    with res.db.connection() as conn:
        set_index_status(conn, run_id, status)
    return status
