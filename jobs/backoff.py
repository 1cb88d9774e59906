"""The backfill yields to the forum: before a batch, a plan or an index build, it waits while
the forum's database is busy (:mod:`sidecar.core.backoff`), and says so on the run.

A wait longer than ``SIDECAR_BACKFILL_BUSY_MAX_WAIT_S`` raises :class:`DatabaseBusy`, a transient
failure: RQ retries the job with its backoff (it never counts towards pausing the run).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from sidecar.config.settings import Settings
from sidecar.core.backoff import LoadLimits, busy_reason
from sidecar.db.backfill_runs import set_waiting
from sidecar.db.load import database_load
from sidecar.errors import ServiceUnavailable
from sidecar.runtime.resources import Resources

log = logging.getLogger(__name__)


class DatabaseBusy(ServiceUnavailable):
    """The forum's database stayed busy longer than the backfill waits in one job (the command
    line prints it as one line; a job is retried later)."""

    code = "database_busy"
    transient = True  # jobs.errors.classify: retry later, never a reason to pause


def load_limits(settings: Settings) -> LoadLimits:
    """The settings' limits (``SIDECAR_BACKFILL_MAX_*``)."""
    return LoadLimits(max_active=settings.backfill_max_active,
                      max_connections_pct=settings.backfill_max_connections_pct,
                      max_replication_lag_s=settings.backfill_max_replication_lag_s)


def wait_until_quiet(res: Resources, run_id: int, *,
                     sleep: Callable[[float], None] = time.sleep) -> float:
    """Return once the database is not busy (seconds waited); raise :class:`DatabaseBusy`
    after ``backfill_busy_max_wait_s``. The run records the wait while it lasts."""
    settings = res.settings
    limits = load_limits(settings)
    waited = 0.0
    while True:
        with res.db.connection() as conn:
            reason = busy_reason(database_load(conn), limits)
            if reason is None:
                set_waiting(conn, run_id, None)
                if waited:
                    log.info("run #%d: the database is quiet again after %.0f s", run_id,
                             waited)
                return waited
            if not waited:
                log.warning("run #%d waits: the forum's database is busy (%s)", run_id, reason)
            set_waiting(conn, run_id, reason)
        if waited >= settings.backfill_busy_max_wait_s:
            raise DatabaseBusy(f"the forum's database stayed busy for {waited:.0f} s ({reason})")
        sleep(settings.backfill_busy_check_s)
        waited += settings.backfill_busy_check_s
