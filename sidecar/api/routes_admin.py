"""Operator routes: backfill runs (watch, start, pause, resume, stop) and the job queues."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from flask import Blueprint
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, ConfigDict, Field, computed_field

from jobs import driver
from jobs.queues import report
from jobs.runs import change_status, parse_until
from sidecar.api.context import get_resources, parse_body, parse_query, respond
from sidecar.api.openapi import BODY_ERRORS, documented
from sidecar.api.schemas import IsoDateTime, ResponseModel, StrictRequest
from sidecar.db.backfill_runs import get_run, list_runs

bp = Blueprint("admin", __name__)


class BackfillQuery(BaseModel):
    """Query string of `GET /v1/admin/backfill` (strings are converted: it is a URL)."""

    model_config = ConfigDict(extra="forbid")

    run: int | None = Field(default=None, gt=0, lt=2**63, description="One run by id.")
    limit: int = Field(default=10, ge=1, le=100, description="Most recent runs.")


class StartBackfill(StrictRequest):
    """`POST /v1/admin/backfill`: start a run of the serving model."""

    strategy: int | None = Field(default=None, ge=1, le=2,
                                 description="Default: SIDECAR_STRATEGY.")
    budget: int | None = Field(default=None, ge=1, le=100_000_000,
                               description="Embed at most this many posts.")
    until: str | None = Field(default=None, pattern=r"^\d{1,2}:\d{2}$",
                              description="Take no batch after this local time (HH:MM).")


class RunPhases(ResponseModel):
    """What the plan found to embed, by reason."""

    missing: int = Field(description="Public posts without a vector of this model.")
    outdated: int = Field(description="Vectors of an older model or strategy version.")
    drift: int = Field(description="Posts whose text changed since they were embedded.")


class RunRecord(ResponseModel):
    """A backfill run, read from ``jobs.runs.Run`` (see docs/jobs.md for every field)."""

    id: int
    model_id: int
    model_name: str
    model_version: int
    strategy_id: int
    strategy_version: int
    status: Literal["planning", "running", "paused", "finished"]
    stop_reason: str | None
    pause_reason: str | None
    budget: int | None
    deadline: IsoDateTime | None
    batch_size: int
    # Answered grouped, under ``phases``.
    phase_missing: int = Field(exclude=True)
    phase_outdated: int = Field(exclude=True)
    phase_drift: int = Field(exclude=True)
    swept_unchanged: int
    removed_not_public: int = Field(
        description="Vectors of posts no longer public, removed while planning.")
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
    created_at: IsoDateTime
    started_at: IsoDateTime | None
    finished_at: IsoDateTime | None
    updated_at: IsoDateTime
    waiting_since: IsoDateTime | None = Field(
        description="Since when the run has been waiting for a busy forum database before its "
                    "next batch (null while it works).")
    waiting_reason: str | None = Field(description="Why it waits: the limit passed.")
    remaining: int = Field(description="Budgeted posts no batch has settled yet.")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def skipped(self) -> int:
        """Posts skipped, unchanged or gone."""
        return self.skipped_unchanged + self.skipped_gone

    @computed_field  # type: ignore[prop-decorator]
    @property
    def phases(self) -> RunPhases:
        """The plan's counts by reason."""
        return RunPhases(missing=self.phase_missing, outdated=self.phase_outdated,
                         drift=self.phase_drift)


class BackfillStatus(ResponseModel):
    """`GET /v1/admin/backfill`."""

    runs: list[RunRecord]
    queues: dict[str, Any] = Field(description="Jobs per queue and state, or an error.")


class RunAnswer(ResponseModel):
    """A run after an operator's action."""

    run: RunRecord


def _queues() -> dict[str, Any]:
    res = get_resources()
    try:
        return report(res.redis, res.settings)
    except Exception as exc:  # the runs are in PostgreSQL: still worth answering
        return {"error": f"queues unavailable: {type(exc).__name__}"}


@bp.get("/v1/admin/backfill")
@documented(tag="admin", query=BackfillQuery, response=BackfillStatus, errors=(400, 401, 404, 422),
            summary="Backfill runs (budgeted, done, skipped, failed, remaining, why stopped) "
                    "and the job queues.")
def backfill_status() -> ResponseReturnValue:
    """The most recent runs, or one run, with queue counts."""
    query = parse_query(BackfillQuery)
    res = get_resources()
    with res.db.connection() as conn:
        runs = [get_run(conn, query.run)] if query.run else list_runs(conn, limit=query.limit)
    return respond(BackfillStatus, {"runs": runs, "queues": _queues()})


@bp.post("/v1/admin/backfill")
@documented(tag="admin", request=StartBackfill, response=RunAnswer, status=202,
            errors=(*BODY_ERRORS, 409, 503),
            summary="Start a backfill run of the serving model; a worker plans and works it.")
def backfill_start() -> ResponseReturnValue:
    """Queue a run (409 if one is live for the same model and strategy)."""
    body = parse_body(StartBackfill)
    res = get_resources()
    deadline = parse_until(body.until, datetime.now().astimezone()) if body.until else None
    run = driver.start_run(res, strategy=body.strategy, budget=body.budget, deadline=deadline)
    return respond(RunAnswer, {"run": run}, 202)


# Run ids are bigints: a larger one matches no route (a 404), it never reaches PostgreSQL.
@bp.post(f"/v1/admin/backfill/<int(max={2**63 - 1}):run_id>/<any(pause, resume, stop):action>")
@documented(tag="admin", response=RunAnswer, errors=(401, 404, 409),
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
    return respond(RunAnswer, {"run": run})
