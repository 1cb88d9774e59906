"""The RQ job functions. Each takes ids (run, batch, posts, topics), never objects.

They run in ``sidecar worker`` (a ``SimpleWorker``: no fork per job) and find the process's
resources (database, Redis, the preloaded embedder) in :mod:`jobs.context`.
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Any

import redis
from rq import get_current_job
from rq.job import Job

from jobs import context, driver, planner, queues
from jobs.batch import OutcomeStatus, execute_batch, give_up_batch
from jobs.errors import describe
from sidecar.core.strategy import STRATEGY_VERSIONS
from sidecar.db.backfill_runs import RunStatus, pause_planning
from sidecar.db.embeddings import (
    RegisteredModel,
    delete_embeddings,
    delete_not_public,
    pairs_with_vectors,
)
from sidecar.db.pool import DictConn
from sidecar.db.public import public_posts_in_scope
from sidecar.errors import ConfigurationError
from sidecar.ingest.indexing import BatchResult
from sidecar.related.cache import drop_for_event
from sidecar.runtime.resources import Resources

log = logging.getLogger(__name__)


def _resources() -> Resources:
    """What ``sidecar worker`` installed; under a plain ``rq worker``, started here, once."""
    return context.installed() or context.start_from_environment()


def _job_id() -> str | None:
    job = get_current_job()
    return job.id if job is not None else None


def plan_run(run_id: int) -> dict[str, Any]:
    """Plan a run, then enqueue its first batches (or finish it when there is nothing to do)."""
    res = _resources()
    run = planner.plan_run(res, run_id)
    if run.status == RunStatus.RUNNING:
        driver.pump(res, run_id)
    elif run.status == RunStatus.FINISHED:
        driver.on_finished(res, run)
    return {"run": run_id, "status": run.status.value, "budgeted": run.budgeted}


def on_plan_failure(job: Job, connection: redis.Redis, exc_type: type[BaseException],
                    exc: BaseException | None, tb: TracebackType | None) -> None:
    """Planning that keeps failing pauses its run with the reason, instead of leaving it stuck."""
    if job.retries_left:
        return
    with context.for_callbacks().db.connection() as conn:
        pause_planning(conn, int(job.args[0]),
                       f"planning failed: {describe(exc) if exc else exc_type.__name__}; fix it, "
                       "then `sidecar backfill resume`", describe(exc) if exc else None)


def backfill_batch(run_id: int, seq: int) -> dict[str, Any]:
    """Embed one planned batch, count it, and keep the run's window of jobs full."""
    res = _resources()
    outcome = execute_batch(res, run_id, seq, job_id=_job_id())
    if outcome.status != OutcomeStatus.SKIPPED:
        driver.pump(res, run_id)
        driver.finish_if_done(res, run_id)
    return outcome.as_dict()


def on_batch_failure(job: Job, connection: redis.Redis, exc_type: type[BaseException],
                     exc: BaseException | None, tb: TracebackType | None) -> None:
    """Called by RQ on every failure, abandoned jobs included; acts once retries are spent."""
    if job.retries_left:
        return
    res = context.for_callbacks()
    run_id, seq = int(job.args[0]), int(job.args[1])
    give_up_batch(res, run_id, seq, exc, job.id)
    driver.pump(res, run_id)
    driver.finish_if_done(res, run_id)


def build_index(run_id: int) -> str:
    """The HNSW index of a completed run's (model, strategy), built CONCURRENTLY."""
    return driver.build_index(_resources(), run_id)


def _drop_gone(conn: DictConn, result: BatchResult) -> None:
    # A post that stopped being public between the event and now loses its vectors here too.
    if result.gone_ids:
        delete_embeddings(conn, result.gone_ids)


def index_targets(res: Resources) -> list[tuple[RegisteredModel, int]]:
    """(model, strategy) pairs kept fresh: the serving pair, and every pair that has vectors."""
    targets = [(res.model, res.settings.strategy)]
    with res.db.connection() as conn:
        pairs = pairs_with_vectors(conn, sorted(STRATEGY_VERSIONS))
    for model_id, strategy in pairs:
        if (model_id, strategy) != (res.model.id, res.settings.strategy):
            targets.append((res.model_by_id(model_id), strategy))
    return targets


def embed_posts(post_ids: list[int]) -> dict[str, Any]:
    """Re-embed posts (created, edited, recovered) for every (model, strategy) that has vectors.

    The digest decides: a post whose embedded text did not change costs no model call.
    """
    res = _resources()
    done: dict[str, Any] = {}
    for model, strategy in index_targets(res):
        try:
            indexer = res.indexer(model, strategy)
        except ConfigurationError as exc:
            # Another model's vectors with no prepared model here: the backfill's drift phase
            # will catch up once it is prepared; the serving model is always loadable.
            log.warning("skipping %s/strategy %d: %s", model.name, strategy, exc.message)
            continue
        result = indexer.embed_posts(post_ids, on_write=_drop_gone)
        done[f"{model.name}/{strategy}"] = {"embedded": result.embedded,
                                            "unchanged": result.unchanged,
                                            "gone": result.missing}
    # Lists ranked between the event and now read the old vectors: drop them again.
    drop_for_event(res.redis, res.settings, res.db, "post_edited", post_ids)
    return done


def reindex_scope(kind: str, ids: list[int]) -> dict[str, Any]:
    """A topic or category changed: drop vectors of its posts no longer public, re-embed the rest.

    Re-embedding is fanned out as ``embed_posts`` jobs of ``backfill_batch_size`` posts.
    """
    res = _resources()
    scope = {"topic": "topic_ids", "category": "category_ids"}[kind]
    with res.db.connection() as conn:
        removed = delete_not_public(conn, **{scope: ids})
        post_ids = public_posts_in_scope(conn, **{scope: ids},
                                         min_chars=res.settings.min_post_chars)
    size = res.settings.backfill_batch_size
    job_ids = [
        queues.enqueue(res.redis, res.settings, queues.INDEX, embed_posts,
                       post_ids[i:i + size],
                       description=f"re-embed {min(size, len(post_ids) - i)} posts of {kind}s "
                                   f"{ids[:5]}").id
        for i in range(0, len(post_ids), size)
    ]
    return {"removed": removed, "posts": len(post_ids), "jobs": job_ids}
