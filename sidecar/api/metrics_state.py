"""Gauges read when Prometheus scrapes: the backfill runs, the answer zones' calibration, this
node's keyword index against the change log, and the forum database's load.

They are facts of the database and of this node's files, not of one process. The database's
part is read at most once per ``SIDECAR_METRICS_STATE_TTL_S`` by each process (a few small
queries), on a connection of its own (``sidecar-metrics``), never one of the API's pool: a
scrape, however frequent, neither takes a request's connection nor queries the forum's database
each time. This node's keyword index is read from its files at each scrape. What an operator
must be told (deploy/prometheus/sidecar-alerts.yml) is built on these and on the request
counters of :mod:`sidecar.api.metrics`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import psycopg
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from psycopg.rows import dict_row

from sidecar.core.backoff import DbLoad
from sidecar.db.keyword_sql import last_change
from sidecar.db.load import database_load
from sidecar.db.ops_read import RunGauge, latest_runs
from sidecar.runtime.resources import Resources

log = logging.getLogger(__name__)

RUN_STATES = ("planning", "running", "paused", "finished")
_RUN = ["model", "strategy"]


def _families() -> dict[str, GaugeMetricFamily]:
    g = GaugeMetricFamily
    return {
        "up": g("sidecar_state_up", "1 when the state below could be read from the database"),
        "state": g("sidecar_backfill_run_state", "The latest backfill run's state (1 for its "
                   "state)", labels=[*_RUN, "state"]),
        "paused": g("sidecar_backfill_paused", "1 when the latest run is paused: reason error "
                    "(the embedding provider kept failing) or operator", labels=[*_RUN, "reason"]),
        "failed": g("sidecar_backfill_failed_posts", "Posts whose batch failed in the latest run",
                    labels=_RUN),
        "errors": g("sidecar_backfill_consecutive_errors", "Provider errors in a row in the "
                    "latest run", labels=_RUN),
        "waiting": g("sidecar_backfill_waiting_seconds", "How long the latest run has waited "
                     "for a busy forum database (0: it works)", labels=_RUN),
        "success": g("sidecar_backfill_last_success_timestamp_seconds", "When a run last "
                     "finished its work (done, budget or deadline)", labels=_RUN),
        "calibrated": g("sidecar_zones_calibrated", "1 when the served scorer's answer zones "
                        "were calibrated on this forum (sidecar calibrate)", labels=["scorer"]),
        "calibrated_at": g("sidecar_zones_calibrated_timestamp_seconds", "When the served "
                           "scorer's zones were calibrated", labels=["scorer"]),
        "kw_ready": g("sidecar_keyword_index_ready", "1 when this node has a keyword index"),
        "kw_behind": g("sidecar_keyword_changes_behind", "Change-log entries this node's keyword "
                       "index has not applied yet"),
        "kw_synced": g("sidecar_keyword_last_sync_timestamp_seconds", "When this node's keyword "
                       "index last applied the change log"),
        "connections": g("sidecar_db_connections", "Connections to the forum's PostgreSQL "
                         "server, every database"),
        "max_connections": g("sidecar_db_max_connections", "The server's max_connections"),
        "active": g("sidecar_db_active_queries", "Queries running in the forum's database, not "
                    "the sidecar's (only with pg_read_all_stats)"),
    }


@dataclass(frozen=True)
class DatabaseState:
    """What the database says, read once and reused until it is ``ttl_s`` old."""

    runs: list[RunGauge]
    load: DbLoad
    logged: int  # the change log's latest id


def read_database_state(res: Resources) -> DatabaseState:
    """The database's part, on a connection of its own (not the API pool's), closed after."""
    with psycopg.connect(res.conninfo("metrics"), autocommit=True, row_factory=dict_row) as conn:
        return DatabaseState(latest_runs(conn), database_load(conn), last_change(conn))


class StateCollector(Collector):
    """The scrape-time gauges of one API process (its resources found through ``source``).

    ``read`` reads the database's part (:func:`read_database_state`); it runs at most once per
    ``ttl_s`` (a failed read too: a database that cannot answer is not asked at every scrape).
    """

    def __init__(self, source: Callable[[], Resources | None], ttl_s: float = 30.0,
                 read: Callable[[Resources], DatabaseState] = read_database_state,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.source = source
        self._ttl_s = ttl_s
        self._read = read
        self._clock = clock
        self._lock = threading.Lock()  # one read at a time; the others take its answer
        self._read_at: float | None = None
        self._state: DatabaseState | None = None

    def database_state(self, res: Resources) -> DatabaseState | None:
        """The cached state, read again once it is ``ttl_s`` old; None when it could not be."""
        with self._lock:
            now = self._clock()
            if self._read_at is None or now - self._read_at >= self._ttl_s:
                self._read_at = now
                try:
                    self._state = self._read(res)
                except Exception as exc:  # a scrape reports, it does not raise
                    log.warning("metrics: the database state could not be read: %s", exc)
                    self._state = None
            return self._state

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The families, without reading anything (checked when the registry takes it)."""
        yield from _families().values()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Read the state now; what cannot be read is left out, and ``sidecar_state_up`` 0."""
        f = _families()
        res = self.source()
        up = res is not None
        if res is not None:
            _zones(res, f)
            state = self.database_state(res)
            up = state is not None
            if state is not None:
                _database(res, state, f)
        f["up"].add_metric([], 1.0 if up else 0.0)
        yield from f.values()


def _database(res: Resources, state: DatabaseState, f: dict[str, GaugeMetricFamily]) -> None:
    runs, load, logged = state.runs, state.load, state.logged
    for run in runs:
        labels = [run.model_name, str(run.strategy_id)]
        for name in RUN_STATES:
            f["state"].add_metric([*labels, name], 1.0 if run.status == name else 0.0)
        if run.status == "paused":
            f["paused"].add_metric([*labels, run.stop_reason or "operator"], 1.0)
        f["failed"].add_metric(labels, float(run.failed))
        f["errors"].add_metric(labels, float(run.consecutive_errors))
        f["waiting"].add_metric(labels, run.waiting_s)
        if run.last_success is not None:
            f["success"].add_metric(labels, run.last_success.timestamp())
    f["connections"].add_metric([], float(load.connections))
    f["max_connections"].add_metric([], float(load.max_connections))
    if load.active is not None:
        f["active"].add_metric([], float(load.active))
    node: dict[str, Any] = res.search.keyword.describe() if res.loaded else {}
    ready = node.get("state") == "ready"
    f["kw_ready"].add_metric([], 1.0 if ready else 0.0)
    if ready:
        f["kw_behind"].add_metric([], float(max(0, logged - int(node["last_change"] or 0))))
        f["kw_synced"].add_metric([], _epoch(str(node["synced_at"])))


def _zones(res: Resources, f: dict[str, GaugeMetricFamily]) -> None:
    if res.loaded is None:
        return
    reranker = res.reranker
    scorer = (f"cross-encoder:{reranker.name}" if reranker is not None
              else f"bi-encoder:{res.model.name}")
    calibration = res.profile.zones_for(scorer)
    f["calibrated"].add_metric([scorer], 0.0 if calibration is None else 1.0)
    if calibration is not None:
        f["calibrated_at"].add_metric([scorer], _epoch(calibration.created_at))


def _epoch(iso: str) -> float:
    """Seconds since the epoch of an ISO date or time (UTC when it names no zone)."""
    try:
        when = datetime.fromisoformat(iso)
    except ValueError:
        return time.time()
    return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
