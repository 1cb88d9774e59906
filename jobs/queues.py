"""Queue names, the retry policy, and enqueuing with the settings' timeouts and retries."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import redis
from rq import Callback, Queue, Retry, Worker
from rq.job import Job

from sidecar.config.settings import Settings
from sidecar.errors import ConfigurationError, ServiceUnavailable

# The index queue (forum events) is listed first: a worker takes fresh edits before the next
# backfill batch, so members never wait behind an overnight run.
INDEX = "index"
BACKFILL = "backfill"
KINDS = (INDEX, BACKFILL)
# How long a job's result and a failed job stay in Redis (rq's registries), in seconds.
RESULT_TTL = 24 * 3600
FAILURE_TTL = 14 * 24 * 3600


def queue_name(settings: Settings, kind: str) -> str:
    """``<prefix>-index`` or ``<prefix>-backfill``."""
    if kind not in KINDS:
        raise ValueError(f"unknown queue kind {kind!r}")
    return f"{settings.queue_prefix}-{kind}"


def queue(conn: redis.Redis, settings: Settings, kind: str) -> Queue:
    """One of the sidecar's queues on ``conn``."""
    return Queue(queue_name(settings, kind), connection=conn,
                 default_timeout=settings.job_timeout_s)


def all_queues(conn: redis.Redis, settings: Settings) -> list[Queue]:
    """Every sidecar queue, in the order a worker takes them."""
    return [queue(conn, settings, kind) for kind in KINDS]


def retry_intervals(settings: Settings) -> list[int]:
    """``SIDECAR_JOB_RETRY_INTERVALS`` ("30,180,1200") as seconds."""
    try:
        values = [int(v) for v in settings.job_retry_intervals.replace(" ", "").split(",") if v]
    except ValueError as exc:
        raise ConfigurationError(
            f"SIDECAR_JOB_RETRY_INTERVALS must be comma-separated seconds, got "
            f"{settings.job_retry_intervals!r}"
        ) from exc
    if any(v < 0 for v in values):
        raise ConfigurationError("SIDECAR_JOB_RETRY_INTERVALS cannot hold negative seconds")
    return values or [0]


def retry_policy(settings: Settings) -> Retry | None:
    """``job_retries`` retries, waiting the configured intervals (the last one repeats)."""
    if settings.job_retries <= 0:
        return None
    return Retry(max=settings.job_retries, interval=retry_intervals(settings))


def enqueue(
    conn: redis.Redis,
    settings: Settings,
    kind: str,
    func: str | Callable[..., Any],
    *args: Any,
    job_id: str | None = None,
    description: str | None = None,
    on_failure: str | Callable[..., Any] | None = None,
    pipeline: Any = None,
    delay_s: float = 0,
) -> Job:
    """Enqueue ``func(*args)`` with the sidecar's timeout, retries and result lifetimes; with
    ``delay_s``, scheduled that much later (the worker's scheduler queues it when due).

    Redis being unreachable is a 503 for the API (``ServiceUnavailable``), not a 500.
    """
    try:
        target: Any = func  # rq accepts a callable or its dotted path
        q = queue(conn, settings, kind)
        options: dict[str, Any] = {
            "job_id": job_id, "description": description,
            "job_timeout": settings.job_timeout_s, "retry": retry_policy(settings),
            "result_ttl": RESULT_TTL, "failure_ttl": FAILURE_TTL,
            "on_failure": Callback(on_failure) if on_failure else None, "pipeline": pipeline}
        if delay_s > 0:
            return q.enqueue_in(timedelta(seconds=delay_s), target, *args, **options)
        return q.enqueue(target, *args, **options)
    except redis.RedisError as exc:
        raise ServiceUnavailable("the job queue (Redis) is unavailable right now",
                                 internal=str(exc)) from exc


def report(conn: redis.Redis, settings: Settings, *, failed: int = 0) -> dict[str, Any]:
    """Counts per queue and registry, the workers, and the last failures with their reason."""
    out: dict[str, Any] = {"queues": {}, "workers": []}
    for q in all_queues(conn, settings):
        entry: dict[str, Any] = {
            "queued": q.count,
            # No cleanup here: cleaning the started registry runs failure callbacks, which
            # belong in a worker, not in whoever asks for a report.
            "started": len(q.started_job_registry.get_job_ids(cleanup=False)),
            "scheduled": len(q.scheduled_job_registry.get_job_ids(cleanup=False)),
            "failed": len(q.failed_job_registry.get_job_ids(cleanup=False)),
            "finished": len(q.finished_job_registry.get_job_ids(cleanup=False)),
        }
        if failed:
            entry["recent_failures"] = [_failure(q, job_id) for job_id in
                                        q.failed_job_registry.get_job_ids(
                                            0, failed - 1, desc=True, cleanup=False)]
        out["queues"][q.name] = entry
    for w in Worker.all(connection=conn):
        if any(name.startswith(f"{settings.queue_prefix}-") for name in w.queue_names()):
            out["workers"].append({"name": w.name, "state": w.state, "queues": w.queue_names()})
    return out


def _failure(q: Queue, job_id: str) -> dict[str, Any]:
    job = q.fetch_job(job_id)
    if job is None:
        return {"id": job_id, "reason": "expired"}
    result = job.latest_result()
    lines = (result.exc_string or "").strip().splitlines() if result else []
    return {"id": job_id, "description": job.description,
            "ended_at": job.ended_at.isoformat() if job.ended_at else None,
            "reason": lines[-1] if lines else None}
