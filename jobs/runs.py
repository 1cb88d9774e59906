"""Backfill run records in PostgreSQL: creation, plan, status changes, finishing.

How batches are counted is in :mod:`jobs.ledger`. Locks are always taken run row first, then
batch rows, so status changes and batch accounting never deadlock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, time, timedelta
from typing import Any

import psycopg

from sidecar.db.embeddings import RegisteredModel
from sidecar.db.pool import DictConn
from sidecar.errors import Conflict, InvalidInput, NotFound

LIVE = ("planning", "running", "paused")
ACTIONS = ("pause", "resume", "stop")


@dataclass(frozen=True)
class Run:
    """One backfill run, as stored."""

    id: int
    model_id: int
    model_name: str
    model_version: int
    strategy_id: int
    strategy_version: int
    status: str
    stop_reason: str | None
    pause_reason: str | None
    budget: int | None
    deadline: datetime | None
    batch_size: int
    phase_missing: int
    phase_outdated: int
    phase_drift: int
    swept_unchanged: int
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
        for key in ("deadline", "created_at", "started_at", "finished_at", "updated_at"):
            value = data[key]
            data[key] = value.isoformat() if value is not None else None
        data["remaining"] = self.remaining
        data["skipped"] = self.skipped_unchanged + self.skipped_gone
        data["phases"] = {"missing": data.pop("phase_missing"),
                          "outdated": data.pop("phase_outdated"),
                          "drift": data.pop("phase_drift")}
        return data


_COLUMNS = ", ".join(Run.__dataclass_fields__)


def registered_model(conn: DictConn, model_id: int) -> RegisteredModel:
    """A model of the registry by id."""
    row = conn.execute(
        "SELECT id, name, dimensions, version FROM sidecar_embedding_models WHERE id = %s",
        (model_id,),
    ).fetchone()
    if row is None:
        raise NotFound(f"no registered embedding model with id {model_id}")
    return RegisteredModel(row["id"], row["name"], row["dimensions"], row["version"])


def parse_until(text: str, now: datetime) -> datetime:
    """The next local ``HH:MM`` after ``now`` (an aware datetime): tonight's or tomorrow's."""
    try:
        hour, minute = (int(part) for part in text.strip().split(":"))
        wanted = time(hour, minute)
    except ValueError as exc:
        raise InvalidInput(f"--until wants a local time HH:MM, got {text!r}") from exc
    deadline = now.replace(hour=wanted.hour, minute=wanted.minute, second=0, microsecond=0)
    return deadline if deadline > now else deadline + timedelta(days=1)


def create_run(
    conn: DictConn,
    model: RegisteredModel,
    strategy: int,
    strategy_version: int,
    *,
    batch_size: int,
    budget: int | None = None,
    deadline: datetime | None = None,
) -> Run:
    """Record a new run in ``planning``; one live run per (model, strategy)."""
    if budget is not None and budget < 1:
        raise InvalidInput("the budget must be at least 1 post")
    try:
        with conn.transaction():
            row = conn.execute(
                f"INSERT INTO sidecar_backfill_runs (model_id, model_name, model_version,"
                f" strategy_id, strategy_version, budget, deadline, batch_size)"
                f" VALUES (%s, %s, %s, %s, %s, %s, %s, %s) RETURNING {_COLUMNS}",
                (model.id, model.name, model.version, strategy, strategy_version, budget,
                 deadline, batch_size),
            ).fetchone()
    except psycopg.errors.UniqueViolation:
        live = live_run(conn, model.id, strategy)
        what = f"run #{live.id} is {live.status}" if live else "another run is live"
        raise Conflict(
            f"{what} for ({model.name}, strategy {strategy}): watch it with `sidecar backfill "
            "status`, resume it with `sidecar backfill resume` or stop it with `sidecar "
            "backfill stop`"
        ) from None
    assert row is not None
    return Run(**row)


def get_run(conn: DictConn, run_id: int, *, lock: bool = False) -> Run:
    """A run by id (``lock``: FOR UPDATE, to serialize status changes)."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM sidecar_backfill_runs WHERE id = %s"
        + (" FOR UPDATE" if lock else ""),
        (run_id,),
    ).fetchone()
    if row is None:
        raise NotFound(f"no backfill run #{run_id}")
    return Run(**row)


def live_run(conn: DictConn, model_id: int, strategy: int) -> Run | None:
    """The live run of a (model, strategy), if any."""
    row = conn.execute(
        f"SELECT {_COLUMNS} FROM sidecar_backfill_runs WHERE model_id = %s AND strategy_id = %s"
        " AND status <> 'finished'",
        (model_id, strategy),
    ).fetchone()
    return Run(**row) if row else None


def list_runs(conn: DictConn, *, limit: int = 10, live_only: bool = False) -> list[Run]:
    """Most recent runs first."""
    where = "WHERE status <> 'finished'" if live_only else ""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM sidecar_backfill_runs {where} ORDER BY id DESC LIMIT %s",
        (limit,),
    ).fetchall()
    return [Run(**r) for r in rows]


def save_plan(
    conn: DictConn,
    run_id: int,
    batches: Sequence[tuple[str, list[int]]],
    *,
    phases: dict[str, int],
    swept_unchanged: int,
    not_planned: int,
) -> Run:
    """Store the planned batches and start the run (or finish it at once when empty)."""
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO sidecar_backfill_batches (run_id, seq, phase, post_ids)"
            " VALUES (%s, %s, %s, %s)",
            [(run_id, seq, phase, ids) for seq, (phase, ids) in enumerate(batches)],
        )
    budgeted = sum(len(ids) for _, ids in batches)
    status = "running" if batches else "finished"
    reason = None if batches else ("budget" if not_planned else "done")
    row = conn.execute(
        f"UPDATE sidecar_backfill_runs SET status = %s, stop_reason = %s, phase_missing = %s,"
        f" phase_outdated = %s, phase_drift = %s, swept_unchanged = %s, budgeted = %s,"
        f" not_planned = %s, started_at = now(), updated_at = now(),"
        f" finished_at = CASE WHEN %s = 'finished' THEN now() END"
        f" WHERE id = %s AND status = 'planning' RETURNING {_COLUMNS}",
        (status, reason, phases.get("missing", 0), phases.get("outdated", 0),
         phases.get("drift", 0), swept_unchanged, budgeted, not_planned, status, run_id),
    ).fetchone()
    if row is None:
        raise Conflict(f"run #{run_id} is no longer planning")
    return Run(**row)


def try_finish(conn: DictConn, run_id: int) -> Run | None:
    """Finish a running run whose batches are all settled. Returns it when this call did."""
    row = conn.execute(
        f"UPDATE sidecar_backfill_runs SET status = 'finished', finished_at = now(),"
        f" updated_at = now(), stop_reason = CASE WHEN not_planned > 0 THEN 'budget'"
        f" ELSE 'done' END"
        f" WHERE id = %s AND status = 'running' AND NOT EXISTS (SELECT 1 FROM"
        f" sidecar_backfill_batches b WHERE b.run_id = %s AND b.state IN ('pending', 'queued'))"
        f" RETURNING {_COLUMNS}",
        (run_id, run_id),
    ).fetchone()
    return Run(**row) if row else None


def stop_run(conn: DictConn, run_id: int, reason: str) -> bool:
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


def change_status(conn: DictConn, run_id: int, action: str) -> Run:
    """An operator's pause, resume or stop. Refused (409) where it makes no sense."""
    if action not in ACTIONS:
        raise InvalidInput(f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
    run = get_run(conn, run_id, lock=True)
    if action == "pause":
        if run.status not in ("running", "planning"):
            raise Conflict(f"run #{run_id} is {run.status}: only a running run can be paused")
        conn.execute(
            "UPDATE sidecar_backfill_runs SET status = 'paused', stop_reason = 'operator',"
            " pause_reason = 'paused by an operator', updated_at = now() WHERE id = %s",
            (run_id,),
        )
    elif action == "resume":
        if run.status != "paused":
            raise Conflict(f"run #{run_id} is {run.status}: only a paused run can be resumed")
        # A run paused while planning has no batches yet: it goes back to planning.
        conn.execute(
            "UPDATE sidecar_backfill_runs SET status = CASE WHEN started_at IS NULL THEN"
            " 'planning' ELSE 'running' END, stop_reason = NULL, pause_reason = NULL,"
            " consecutive_errors = 0, updated_at = now() WHERE id = %s",
            (run_id,),
        )
    else:
        if not run.live:
            raise Conflict(f"run #{run_id} is already finished ({run.stop_reason})")
        stop_run(conn, run_id, "cancelled")
    return get_run(conn, run_id)


def set_index_status(conn: DictConn, run_id: int, status: str) -> None:
    """What became of the run's HNSW index."""
    conn.execute(
        "UPDATE sidecar_backfill_runs SET index_status = %s, updated_at = now() WHERE id = %s",
        (status[:500], run_id),
    )
