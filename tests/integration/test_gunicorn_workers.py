"""Several gunicorn workers: /metrics adds up every worker, and no worker migrates the schema.

A real gunicorn with the deploy configuration and two workers: Prometheus' multiprocess mode
(``PROMETHEUS_MULTIPROC_DIR``, a directory under the state dir unless set) makes every scrape
report the requests of both workers, whichever worker answers the scrape. Migrations belong to
``sidecar db upgrade``: a worker finding the schema behind refuses to start and says so.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from sidecar.db.migrate import upgrade
from sidecar.errors import ConfigurationError
from tests.conftest import API_KEY, make_settings

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
REQUESTS = 60


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def gunicorn(tmp_path: Path, db_url: str, redis_url: str, minilm_dir: Path) -> Iterator[Any]:
    """gunicorn -c deploy/gunicorn.conf.py, two workers, after `sidecar db upgrade`."""
    upgrade(db_url)  # what the unit's ExecStartPre does
    port = _free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("SIDECAR_", "PROMETHEUS_")) and k not in {"DATABASE_URL",
                                                                          "REDIS_URL"}}
    env.update({"DATABASE_URL": db_url, "REDIS_URL": redis_url, "SIDECAR_API_KEY": API_KEY,
                "SIDECAR_STATE_DIR": str(tmp_path / "state"),
                "SIDECAR_EMBED_MODEL_PATH": str(minilm_dir), "SIDECAR_PORT": str(port),
                "SIDECAR_WORKERS": "2", "SIDECAR_THREADS": "2", "HF_HUB_OFFLINE": "1"})
    # A stale file from an earlier run must not be counted.
    stale = tmp_path / "state" / "prometheus"
    stale.mkdir(parents=True)
    (stale / "counter_999999.db").write_bytes(b"garbage")
    log = tmp_path / "gunicorn.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(Path(sys.executable).parent / "gunicorn"), "-c",
                                 str(DEPLOY / "gunicorn.conf.py")], env=env, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                if httpx.get(f"{base}/v1/ready", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.3)
        yield {"base": base, "log": log, "metrics_dir": stale, "db_url": db_url}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


def _served(text: str) -> float:
    """The count of ready probes in one scrape (0 if absent)."""
    m = re.search(r'^sidecar_http_requests_total\{route="/v1/ready",status="200"\} (\S+)$',
                  text, re.M)
    return float(m.group(1)) if m else 0.0


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_metrics_add_up_every_worker(gunicorn: dict[str, Any]) -> None:
    base = gunicorn["base"]
    key = {"Authorization": f"Bearer {API_KEY}"}
    baseline = _served(httpx.get(f"{base}/metrics", headers=key, timeout=5).text)

    def probe(_: int) -> int:
        # A new connection each time, several at once.
        return httpx.get(f"{base}/v1/ready", timeout=10).status_code

    def writers() -> set[str]:
        return {p.name.split("_")[-1] for p in gunicorn["metrics_dir"].glob("counter_*.db")}

    # The kernel may hand one idle worker every connection for a while (seen on CI with two
    # vCPUs), so probe in rounds until both workers have served some: the test is about the
    # scrape adding up the workers, not about how the kernel spreads connections.
    sent, deadline = 0, time.monotonic() + 120
    with ThreadPoolExecutor(8) as pool:
        while True:
            assert set(pool.map(probe, range(REQUESTS))) == {200}
            sent += REQUESTS
            if len(writers() - {"999999.db"}) >= 2:
                break
            assert time.monotonic() < deadline, (sent, writers())
    assert "999999.db" not in writers()  # the stale file was cleared at start
    scrapes = [_served(httpx.get(f"{base}/metrics", headers=key, timeout=5).text)
               for _ in range(10)]
    # Every scrape, whichever worker answers it, counts the probes of both workers.
    assert all(s - baseline >= sent for s in scrapes), (baseline, sent, scrapes)
    log = gunicorn["log"].read_text()
    assert "applying migration" not in log


def test_an_app_on_a_schema_behind_refuses_to_start(tmp_path: Path, db_url: str,
                                                    redis_url: str) -> None:
    from models import DummyEmbedder
    from sidecar.api.app import create_app
    from sidecar.runtime.resources import start_resources

    settings = make_settings(tmp_path, db_url, redis_url)
    with pytest.raises(ConfigurationError, match=r"sidecar db upgrade"):
        start_resources(settings, embedder=DummyEmbedder(dimensions=16), migrate=False)
    with psycopg.connect(db_url) as conn:  # nothing was created behind the operator's back
        assert conn.execute("SELECT to_regclass('sidecar.sidecar_schema_migrations')").fetchone() \
            == (None,)
    upgrade(db_url)
    res = start_resources(settings, embedder=DummyEmbedder(dimensions=16), migrate=False)
    try:
        assert create_app(settings, res).test_client().get("/v1/ready").status_code == 200
    finally:
        res.close()


def test_create_app_does_not_migrate(tmp_path: Path, db_url: str, redis_url: str,
                                     minilm_dir: Path) -> None:
    from sidecar.api.app import create_app

    settings = make_settings(tmp_path, db_url, redis_url, embed_model_path=minilm_dir)
    with pytest.raises(ConfigurationError, match=r"sidecar db upgrade"):
        create_app(settings)
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT to_regclass('sidecar.sidecar_meta')").fetchone() == (None,)


def test_an_exiting_worker_is_marked_dead(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                          ) -> None:
    from types import SimpleNamespace

    from prometheus_client import values

    from sidecar.api.gunicorn_hooks import prepare_metrics_dir, worker_exit

    # prepare_metrics_dir switches this process to multiprocess values: undone afterwards.
    monkeypatch.setattr(values, "ValueClass", values.ValueClass)
    # Recorded before prepare_metrics_dir exports the directory, so that export is undone too
    # (delenv of an absent name records nothing: the directory would leak into later tests).
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "")
    directory = tmp_path / "metrics"
    directory.mkdir()
    (directory / "counter_1.db").write_bytes(b"from an earlier run")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(prepare_metrics_dir(directory)))
    assert list(directory.iterdir()) == []  # emptied at start
    live = directory / "gauge_livesum_4242.db"
    live.write_bytes(b"")
    worker_exit(None, SimpleNamespace(pid=4242, wsgi=None))
    assert not live.exists()
