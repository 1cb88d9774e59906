"""``sidecar_backfill_runs``: one row per backfill run, its plan's counts and its status.

How batches are counted is in :mod:`sidecar.db.backfill_batches`. Locks are always taken run row
first, then batch rows, so status changes and batch accounting never deadlock. What an operator
may do to a run (and the messages that refuse it) is in :mod:`jobs.runs`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sidecar.db.embeddings import RegisteredModel
from sidecar.db.pool import DictConn
from sidecar.db.rows import fetch_all, fetch_one
from sidecar.errors import Conflict, NotFound


class RunStatus(StrEnum):
    """Where a run is (the stored ``status``)."""

    PLANNING = "planning"
    RUNNING = "running"
    PAUSED = "paused"
    FINISHED = "finished"


class StopReason(StrEnum):
    """Why a run finished or paused (the stored ``stop_reason``)."""

    DONE = "done"  # nothing left
    BUDGET = "budget"  # the budget left candidates for a later run
    DEADLINE = "deadline"
    CANCELLED = "cancelled"  # an operator's stop
    OPERATOR = "operator"  # an operator's pause
    ERROR = "error"  # paused by repeated provider errors or failed planning


LIVE = (RunStatus.PLANNING, RunStatus.RUNNING, RunStatus.PAUSED)


@dataclass(frozen=True)
class Run:
    """One backfill run, as stored."""

    id: int
    model_id: int
    model_name: str
    model_version: int
    strategy_id: int
    strategy_version: int
    status: RunStatus
    stop_reason: StopReason | None
    pause_reason: str | None
    budget: int | None
    deadline: datetime | None
    batch_size: int
    phase_missing: int
    phase_outdated: int
    phase_drift: int
    swept_unchanged: int
    removed_not_public: int  # vectors of posts no longer public, removed while planning
    budgeted: int
    not_planned: int
    done: int
    skipped_unchanged: int
    skipped_gone: int
    failed: int
    consecutive_errors: int
    last_error: str | None
    index_status: str | None
    plan_job_id: str | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    updated_at: datetime
    waiting_since: datetime | None  # yielding to a busy forum database (jobs/backoff.py)
    waiting_reason: str | None

    def __post_init__(self) -> None:
        # class_row passes the stored text; the fields hold the enums (equal to that text).
        object.__setattr__(self, "status", RunStatus(self.status))
        if self.stop_reason is not None:
            object.__setattr__(self, "stop_reason", StopReason(self.stop_reason))

    @property
    def remaining(self) -> int:
        """Budgeted posts no batch has settled yet."""
        return (self.budgeted - self.done - self.skipped_unchanged - self.skipped_gone
                - self.failed)

    @property
    def live(self) -> bool:
        """Planning, running or paused: it may still take batches."""
        return self.status in LIVE

    def as_dict(self) -> dict[str, Any]:
        """JSON form (``sidecar backfill status --json``, ``GET /v1/admin/backfill``)."""
        data = asdict(self)
        data["status"] = self.status.value  # plain strings, as stored
        data["stop_reason"] = self.stop_reason.value if self.stop_reason else None
        for key in ("deadline", "created_at", "started_at", "finished_at", "updated_at",
                    "waiting_since"):
            value = data[key]
            data[key] = value.isoformat() if value is not None else None
        data["remaining"] = self.remaining
        data["skipped"] = self.skipped_unchanged + self.skipped_gone
        data["phases"] = {"missing": data.pop("phase_missing"),
                          "outdated": data.pop("phase_outdated"),
                          "drift": data.pop("phase_drift")}
        return data


_COLUMNS = ", ".join(Run.__dataclass_fields__)


def insert_run(conn: DictConn, model: RegisteredModel, strategy: int, strategy_version: int,
               *, batch_size: int, budget: int | None, deadline: datetime | None) -> Run:
    """Record a new run in ``planning``. A second live run of the (model, strategy) raises
    ``psycopg.errors.UniqueViolation`` (a partial unique index), in its own savepoint."""
    with conn.transaction():
        row = fetch_one(
            conn, Run,
            f"INSERT INTO sidecar_backfill_runs (model_id, model_name, model_version,"
            f" strategy_id, strategy_version, budget, deadline, batch_size)"
            f" VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}",
            (model.id, model.name, model.version, strategy, strategy_version, budget,
             deadline, batch_size),
        )
    assert row is not None
    return row


def delete_run(conn: DictConn, run_id: int) -> None:
    """Forget a run (one whose planning could not even be enqueued)."""
    conn.execute("DELETE FROM sidecar_backfill_runs WHERE id = %s", (run_id,))


def get_run(conn: DictConn, run_id: int, *, lock: bool = False) -> Run:
    """A run by id (``lock``: FOR UPDATE, to serialize status changes)."""
    run = fetch_one(conn, Run,
                    f"SELECT {_COLUMNS} FROM sidecar_backfill_runs WHERE id = %s"
                    + (" FOR UPDATE" if lock else ""), (run_id,))
    if run is None:
        raise NotFound(f"no backfill run #{run_id}")
    return run


def live_run(conn: DictConn, model_id: int, strategy: int) -> Run | None:
    """The live run of a (model, strategy), if any."""
    return fetch_one(conn, Run,
                     f"SELECT {_COLUMNS} FROM sidecar_backfill_runs WHERE model_id = %s"
                     " AND strategy_id = %s AND status <> 'finished'", (model_id, strategy))


def list_runs(conn: DictConn, *, limit: int = 10, live_only: bool = False) -> list[Run]:
    """Most recent runs first."""
    where = "WHERE status <> 'finished'" if live_only else ""
    return fetch_all(conn, Run,
                     f"SELECT {_COLUMNS} FROM sidecar_backfill_runs {where} ORDER BY id DESC"
                     " LIMIT %s", (limit,))


def set_plan_job(conn: DictConn, run_id: int, job_id: str) -> None:
    """The job planning the run (so a lost one is found and enqueued again)."""
    conn.execute("UPDATE sidecar_backfill_runs SET plan_job_id = %s, updated_at = now()"
                 " WHERE id = %s", (job_id, run_id))


def save_plan(
    conn: DictConn,
    run_id: int,
    batches: Sequence[tuple[str, list[int]]],
    *,
    phases: dict[str, int],
    swept_unchanged: int,
    not_planned: int,
    removed_not_public: int = 0,
) -> Run:
    """Store the planned batches and start the run (or finish it at once when empty)."""
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO sidecar_backfill_batches (run_id, seq, phase, post_ids)"
            " VALUES (%s, %s, %s, %s)",
            [(run_id, seq, phase, ids) for seq, (phase, ids) in enumerate(batches)],
        )
    budgeted = sum(len(ids) for _, ids in batches)
    status = RunStatus.RUNNING if batches else RunStatus.FINISHED
    reason = None if batches else (StopReason.BUDGET if not_planned else StopReason.DONE)
    run = fetch_one(
        conn, Run,
        f"UPDATE sidecar_backfill_runs SET status = %s, stop_reason = %s, phase_missing = %s,"
        f" phase_outdated = %s, phase_drift = %s, swept_unchanged = %s, budgeted = %s,"
        f" not_planned = %s, removed_not_public = %s, started_at = now(), updated_at = now(),"
        f" finished_at = CASE WHEN %s = 'finished' THEN now() END"
        f" WHERE id = %s AND status = 'planning' RETURNING {_COLUMNS}",
        (status, reason, phases.get("missing", 0), phases.get("outdated", 0),
         phases.get("drift", 0), swept_unchanged, budgeted, not_planned, removed_not_public,
         status, run_id),
    )
    if run is None:
        raise Conflict(f"run #{run_id} is no longer planning")
    return run


def try_finish(conn: DictConn, run_id: int) -> Run | None:
    """Finish a running run whose batches are all settled. Returns it when this call did."""
    return fetch_one(
        conn, Run,
        f"UPDATE sidecar_backfill_runs SET status = 'finished', finished_at = now(),"
        f" updated_at = now(), stop_reason = CASE WHEN not_planned > 0 THEN 'budget'"
        f" ELSE 'done' END"
        f" WHERE id = %s AND status = 'running' AND NOT EXISTS (SELECT 1 FROM"
        f" sidecar_backfill_batches b WHERE b.run_id = %s AND b.state IN ('pending', 'queued'))"
        f" RETURNING {_COLUMNS}",
        (run_id, run_id),
    )


def stop_run(conn: DictConn, run_id: int, reason: StopReason) -> bool:
    """Finish a live run now; its open batches stay unsettled (counted as remaining)."""
    cur = conn.execute(
        "UPDATE sidecar_backfill_runs SET status = 'finished', stop_reason = %s,"
        " finished_at = now(), updated_at = now() WHERE id = %s AND status <> 'finished'",
        (reason, run_id),
    )
    conn.execute(
        "UPDATE sidecar_backfill_batches SET state = 'pending', job_id = NULL"
        " WHERE run_id = %s AND state = 'queued'",
        (run_id,),
    )
    return cur.rowcount > 0


def pause_run(conn: DictConn, run_id: int, reason: StopReason, pause_reason: str) -> None:
    """Pause a run: it takes no more batches until resumed."""
    conn.execute(
        "UPDATE sidecar_backfill_runs SET status = 'paused', stop_reason = %s,"
        " pause_reason = %s, updated_at = now() WHERE id = %s",
        (reason, pause_reason, run_id),
    )


def pause_planning(conn: DictConn, run_id: int, pause_reason: str,
                   last_error: str | None) -> None:
    """Pause a run whose planning failed for good (a run no longer planning is left alone)."""
    conn.execute(
        "UPDATE sidecar_backfill_runs SET status = 'paused', stop_reason = 'error',"
        " pause_reason = %s, last_error = %s, updated_at = now()"
        " WHERE id = %s AND status = 'planning'",
        (pause_reason, last_error, run_id),
    )


def resume_run(conn: DictConn, run_id: int) -> None:
    """Resume a paused run; one paused while planning has no batches yet: back to planning."""
    conn.execute(
        "UPDATE sidecar_backfill_runs SET status = CASE WHEN started_at IS NULL THEN"
        " 'planning' ELSE 'running' END, stop_reason = NULL, pause_reason = NULL,"
        " consecutive_errors = 0, updated_at = now() WHERE id = %s",
        (run_id,),
    )


def set_index_status(conn: DictConn, run_id: int, status: str) -> None:
    """What became of the run's HNSW index."""
    conn.execute(
        "UPDATE sidecar_backfill_runs SET index_status = %s, updated_at = now() WHERE id = %s",
        (status[:500], run_id),
    )


def set_waiting(conn: DictConn, run_id: int, reason: str | None) -> None:
    """Record that the run waits for a busy database (since now, unless it already did), or,
    with None, that it works again."""
    conn.execute(
        "UPDATE sidecar_backfill_runs SET waiting_reason = %(r)s, waiting_since = CASE"
        " WHEN %(r)s::text IS NULL THEN NULL ELSE coalesce(waiting_since, now()) END"
        " WHERE id = %(id)s AND waiting_reason IS DISTINCT FROM %(r)s::text",
        {"r": reason, "id": run_id})
