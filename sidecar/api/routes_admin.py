"""Operator routes: backfill runs (watch, start, pause, resume, stop) and the job queues."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from flask import Blueprint, jsonify, request
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, ConfigDict, Field

from jobs import driver
from jobs.queues import report
from jobs.runs import change_status, parse_until
from sidecar.api.context import get_resources, parse_body
from sidecar.api.openapi import documented
from sidecar.api.schemas import StrictRequest
from sidecar.db.backfill_runs import get_run, list_runs

bp = Blueprint("admin", __name__)


class BackfillQuery(BaseModel):
    """Query string of `GET /v1/admin/backfill` (strings are converted: it is a URL)."""

    model_config = ConfigDict(extra="forbid")

    run: int | None = Field(default=None, gt=0, lt=2**63)
    limit: int = Field(default=10, ge=1, le=100)


class StartBackfill(StrictRequest):
    """`POST /v1/admin/backfill`: start a run of the serving model."""

    strategy: int | None = Field(default=None, ge=1, le=2,
                                 description="Default: SIDECAR_STRATEGY.")
    budget: int | None = Field(default=None, ge=1, le=100_000_000,
                               description="Embed at most this many posts.")
    until: str | None = Field(default=None, pattern=r"^\d{1,2}:\d{2}$",
                              description="Take no batch after this local time (HH:MM).")


class RunRecord(BaseModel):
    """A backfill run (see docs/jobs.md for every field)."""

    model_config = ConfigDict(extra="allow")

    id: int
    model_name: str
    strategy_id: int
    status: Literal["planning", "running", "paused", "finished"]
    stop_reason: str | None
    pause_reason: str | None
    budgeted: int
    done: int
    skipped_unchanged: int
    skipped_gone: int
    failed: int
    remaining: int


class BackfillStatus(BaseModel):
    """`GET /v1/admin/backfill`."""

    runs: list[RunRecord]
    queues: dict[str, Any]


class RunAnswer(BaseModel):
    """A run after an operator's action."""

    run: RunRecord


def _queues() -> dict[str, Any]:
    res = get_resources()
    try:
        return report(res.redis, res.settings)
    except Exception as exc:  # the runs are in PostgreSQL: still worth answering
        return {"error": f"queues unavailable: {type(exc).__name__}"}


@bp.get("/v1/admin/backfill")
@documented(path="/v1/admin/backfill", method="get", tag="admin", response=BackfillStatus,
            summary="Backfill runs (budgeted, done, skipped, failed, remaining, why stopped) "
                    "and the job queues.",
            query=(("run", "integer", "One run by id."),
                   ("limit", "integer", "Most recent runs (1-100, default 10).")))
def backfill_status() -> ResponseReturnValue:
    """The most recent runs, or one run, with queue counts."""
    query = BackfillQuery.model_validate(request.args.to_dict())
    res = get_resources()
    with res.db.connection() as conn:
        runs = [get_run(conn, query.run)] if query.run else list_runs(conn, limit=query.limit)
    return jsonify({"runs": [r.as_dict() for r in runs], "queues": _queues()})


@bp.post("/v1/admin/backfill")
@documented(path="/v1/admin/backfill", method="post", tag="admin", request=StartBackfill,
            response=RunAnswer, status=202, errors=(400, 401, 409, 413, 422, 503),
            summary="Start a backfill run of the serving model; a worker plans and works it.")
def backfill_start() -> ResponseReturnValue:
    """Queue a run (409 if one is live for the same model and strategy)."""
    body = parse_body(StartBackfill)
    res = get_resources()
    deadline = parse_until(body.until, datetime.now().astimezone()) if body.until else None
    run = driver.start_run(res, strategy=body.strategy, budget=body.budget, deadline=deadline)
    return jsonify({"run": run.as_dict()}), 202


@bp.post("/v1/admin/backfill/<int:run_id>/<any(pause, resume, stop):action>")
@documented(path="/v1/admin/backfill/{run_id}/{action}", method="post", tag="admin",
            response=RunAnswer, errors=(401, 404, 409),
            summary="Pause, resume or stop a backfill run (action: pause, resume or stop).")
def backfill_action(run_id: int, action: str) -> ResponseReturnValue:
    """Change a run's status; a resumed run enqueues its pending batches again."""
    res = get_resources()
    with res.db.connection() as conn:
        run = change_status(conn, run_id, action)
    if action == "resume":
        driver.reconcile(res, run_id)
        with res.db.connection() as conn:
            run = get_run(conn, run_id)
    return jsonify({"run": run.as_dict()})
