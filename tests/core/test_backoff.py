"""When the backfill yields to a busy forum database (the pure rule)."""

from __future__ import annotations

import pytest

from sidecar.core.backoff import DbLoad, LoadLimits, busy_reason
from sidecar.db.pool import SessionLimits

QUIET = DbLoad(active=2, connections=20, max_connections=100, replication_lag_s=0.5)


def test_a_quiet_database_is_not_busy() -> None:
    assert busy_reason(QUIET, LoadLimits()) is None


@pytest.mark.parametrize(("load", "words"), [
    (DbLoad(active=17, connections=20, max_connections=100, replication_lag_s=None),
     "17 queries running"),
    (DbLoad(active=None, connections=81, max_connections=100, replication_lag_s=None),
     "81 of 100 connections"),
    (DbLoad(active=None, connections=5, max_connections=100, replication_lag_s=31.0),
     "31 s behind"),
])
def test_each_limit_passed_is_named(load: DbLoad, words: str) -> None:
    reason = busy_reason(load, LoadLimits(max_active=16, max_connections_pct=80,
                                          max_replication_lag_s=30))
    assert reason is not None and words in reason


def test_what_the_role_cannot_see_decides_nothing_and_zero_is_no_limit() -> None:
    unseen = DbLoad(active=None, connections=1, max_connections=100, replication_lag_s=None)
    assert busy_reason(unseen, LoadLimits(max_active=1, max_replication_lag_s=1)) is None
    busy = DbLoad(active=500, connections=99, max_connections=100, replication_lag_s=600)
    assert busy_reason(busy, LoadLimits(0, 0, 0)) is None


def test_session_limits_become_libpq_options_and_keep_the_url_s_own() -> None:
    limits = SessionLimits("sidecar-api", 5.0, 2.0, 60.0)
    assert limits.options() == ("-c statement_timeout=5000 -c lock_timeout=2000"
                                " -c idle_in_transaction_session_timeout=60000")
    info = limits.conninfo("postgresql://u@db/forum?options=-c%20search_path%3Dforum")
    assert "application_name=sidecar-api" in info
    assert "search_path=forum -c statement_timeout=5000" in info
    # Its own schema searched first, set last: a URL's search_path never wins over it.
    assert info.index("search_path=forum") < info.index("-c search_path=sidecar,public")
    # A limit is never 0 (which PostgreSQL reads as "no limit").
    assert "timeout=1 " in SessionLimits("x", 0.0001, 1, 1).options() + " "
