"""Reads for the operators' metrics (``GET /metrics``): each backfill's latest run, at a glance.

Read at scrape time, so an alert sees what the database says now: a run paused by its model
provider, failing batches, a run waiting for a busy database, no successful run for a day.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sidecar.db.pool import DictConn
from sidecar.db.rows import fetch_all

# A run that ended this way did its work (``done``, or what its budget or its deadline allowed).
SUCCESS = ("done", "budget", "deadline")


@dataclass(frozen=True)
class RunGauge:
    """The latest backfill run of one (model, strategy), and its last success."""

    model_name: str
    strategy_id: int
    status: str
    stop_reason: str | None
    failed: int
    consecutive_errors: int
    waiting_s: float  # how long it has waited for a busy database (0: it works)
    last_success: datetime | None


def latest_runs(conn: DictConn) -> list[RunGauge]:
    """One row per (model, strategy) that ever ran."""
    return fetch_all(
        conn, RunGauge,
        """
        SELECT DISTINCT ON (r.model_id, r.strategy_id)
               r.model_name, r.strategy_id, r.status, r.stop_reason, r.failed,
               r.consecutive_errors,
               CASE WHEN r.status <> 'finished' AND r.waiting_since IS NOT NULL
                    THEN extract(epoch FROM now() - r.waiting_since)::float8 ELSE 0 END
                   AS waiting_s,
               (SELECT max(s.finished_at) FROM sidecar_backfill_runs s
                WHERE s.model_id = r.model_id AND s.strategy_id = r.strategy_id
                  AND s.stop_reason = ANY(%s)) AS last_success
        FROM sidecar_backfill_runs r
        ORDER BY r.model_id, r.strategy_id, r.created_at DESC, r.id DESC
        """,
        (list(SUCCESS),),
    )
