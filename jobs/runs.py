"""What may be done to a backfill run: start one, an operator's pause, resume or stop.

The run records and their SQL are :mod:`sidecar.db.backfill_runs`; how batches are counted is
:mod:`sidecar.db.backfill_batches`.
"""

from __future__ import annotations

from datetime import datetime, time, timedelta

import psycopg

from sidecar.db.backfill_runs import (
    Run,
    RunStatus,
    StopReason,
    get_run,
    insert_run,
    live_run,
    pause_run,
    resume_run,
    stop_run,
)
from sidecar.db.embeddings import RegisteredModel
from sidecar.db.pool import DictConn
from sidecar.errors import Conflict, InvalidInput

ACTIONS = ("pause", "resume", "stop")


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
        return insert_run(conn, model, strategy, strategy_version, batch_size=batch_size,
                          budget=budget, deadline=deadline)
    except psycopg.errors.UniqueViolation:
        live = live_run(conn, model.id, strategy)
        what = f"run #{live.id} is {live.status}" if live else "another run is live"
        raise Conflict(
            f"{what} for ({model.name}, strategy {strategy}): watch it with `sidecar backfill "
            "status`, resume it with `sidecar backfill resume` or stop it with `sidecar "
            "backfill stop`"
        ) from None


def change_status(conn: DictConn, run_id: int, action: str) -> Run:
    """An operator's pause, resume or stop. Refused (409) where it makes no sense."""
    if action not in ACTIONS:
        raise InvalidInput(f"unknown action {action!r}; one of {', '.join(ACTIONS)}")
    run = get_run(conn, run_id, lock=True)
    if action == "pause":
        if run.status not in (RunStatus.RUNNING, RunStatus.PLANNING):
            raise Conflict(f"run #{run_id} is {run.status}: only a running run can be paused")
        pause_run(conn, run_id, StopReason.OPERATOR, "paused by an operator")
    elif action == "resume":
        if run.status != RunStatus.PAUSED:
            raise Conflict(f"run #{run_id} is {run.status}: only a paused run can be resumed")
        resume_run(conn, run_id)
    else:
        if not run.live:
            raise Conflict(f"run #{run_id} is already finished ({run.stop_reason})")
        stop_run(conn, run_id, StopReason.CANCELLED)
    return get_run(conn, run_id)
