"""The issue's "done when": real `sidecar worker` processes, one SIGKILLed in the middle of a batch.

Demo forum on real PostgreSQL and Redis, all-MiniLM-L6-v2 in ONNX, a backfill worked by a
worker subprocess that is killed mid-batch and replaced: every public post ends with exactly one
row, no private post has any, the run record's counts are right. Then the live worker handles
forum events: an edit re-embeds exactly that post, a second backfill finds nothing to do, a
deletion removes the vector at once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from jobs import driver
from jobs.planner import plan_run
from jobs.queues import queue
from sidecar.db.vector_index import index_name
from sidecar.runtime.resources import Resources
from tests.conftest import API_KEY, owner_url
from tests.jobs.conftest import (
    private_post_ids,
    public_post_ids,
    run_record,
    start_state,
    vector_rows,
)

pytestmark = pytest.mark.slow
AUTH = {"Authorization": f"Bearer {API_KEY}"}


def _wait(what: str, check: Callable[[], bool], timeout: float, workers: list[Any]) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        for proc, log in workers:
            if proc.poll() is not None:
                raise AssertionError(f"worker exited ({proc.returncode}) while waiting for "
                                     f"{what}:\n{Path(log).read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


@pytest.fixture
def worker_env(tmp_path: Path, db_url: str, redis_url: str, minilm_dir: Path) -> dict[str, str]:
    """The environment of a `sidecar worker` process on the test's services and model."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SIDECAR_") and k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update({
        "DATABASE_URL": db_url, "REDIS_URL": redis_url,
        "SIDECAR_STATE_DIR": str(tmp_path / "state"),
        "SIDECAR_EMBED_MODEL": "all-minilm-l6-v2",
        "SIDECAR_EMBED_MODEL_PATH": str(minilm_dir),
        "SIDECAR_BACKFILL_BATCH_SIZE": "8",
        "SIDECAR_JOB_RETRY_INTERVALS": "0",
        "SIDECAR_API_KEY": API_KEY,
        "SIDECAR_LOG_LEVEL": "INFO",
        "HF_HUB_OFFLINE": "1",
    })
    return env


@pytest.fixture
def spawn(tmp_path: Path, worker_env: dict[str, str]
          ) -> Iterator[Callable[[str], tuple[subprocess.Popen[bytes], Path]]]:
    """Start `sidecar worker` processes (each in its own process group); all killed at the end."""
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str) -> tuple[subprocess.Popen[bytes], Path]:
        log = tmp_path / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-c", "from sidecar.cli import main; main()",
                 "worker", "--heartbeat-ttl", "3",
                 "--name", f"test-{name}-{os.getpid()}"],
                env=worker_env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
        started.append(proc)
        return proc, log

    yield start
    for proc in started:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)


def _blocked(url: str) -> bool:
    """A session of this database waits for a row lock (the worker, on the locked batch)."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname ="
                           " current_database() AND wait_event_type = 'Lock'").fetchone()
    return bool(row and row[0])


def _started_batches(res: Resources) -> list[str]:
    registry = queue(res.redis, res.settings, "backfill").started_job_registry
    return [j for j in registry.get_job_ids(cleanup=False) if "-batch-" in j]


def test_sigkill_mid_batch_then_restart_leaves_one_row_per_public_post(
    tmp_path: Path, db_url: str, redis_client: Any, redis_url: str, minilm: Any,
    spawn: Callable[[str], tuple[subprocess.Popen[bytes], Path]],
) -> None:
    res = start_state(tmp_path, db_url, redis_url, minilm, backfill_batch_size=8)
    try:
        url = owner_url(res.urls.database_url)
        public, private = public_post_ids(url), private_post_ids(url)
        run = driver.start_run(res, enqueue=False)
        plan_run(res, run.id)
        driver.pump(res, run.id)
        # Batch 3's row is locked here: the worker embeds that batch, writes its vectors, then
        # blocks where it counts the batch, inside the transaction holding the vectors. There
        # it is killed: mid-batch, deterministically, however fast the machine.
        blocker = psycopg.connect(url)
        blocker.execute("SELECT 1 FROM sidecar.sidecar_backfill_batches"
                        " WHERE run_id = %s AND seq = 3"
                        " FOR UPDATE", (run.id,))
        first = spawn("first")
        _wait("the worker to block inside batch 3", lambda: _blocked(url), timeout=240,
              workers=[first])
        in_flight = _started_batches(res)
        os.killpg(first[0].pid, signal.SIGKILL)  # the worker and anything it started
        first[0].wait(timeout=30)
        blocker.rollback()
        blocker.close()
        at_kill = run_record(res, run.id)
        assert at_kill.status == "running"
        assert at_kill.done == 3 * 8 and at_kill.remaining == at_kill.budgeted - 24
        with psycopg.connect(url) as conn:
            killed = conn.execute(
                "SELECT seq, state FROM sidecar.sidecar_backfill_batches WHERE job_id = ANY(%s)",
                (in_flight,)).fetchall()
        assert killed == [(3, "queued")]  # taken, written, never committed
        # Nothing is counted twice or half: the killed batch's vectors rolled back with it.
        assert len(vector_rows(url, res.model.id)) == at_kill.done

        second = spawn("second")
        _wait("the run to finish", lambda: run_record(res, run.id).status == "finished",
              timeout=300, workers=[second])
        done = run_record(res, run.id)
        assert (done.stop_reason, done.remaining, done.failed) == ("done", 0, 0)
        assert done.budgeted == len(public)
        assert done.done + done.skipped_unchanged + done.skipped_gone == done.budgeted
        rows = vector_rows(url, res.model.id)
        assert len(rows) == len({p for p, _ in rows}) == len(public)
        assert {p for p, _ in rows} == public and not {p for p, _ in rows} & private
        # The killed batch was retried by the new worker, not lost and not failed.
        with psycopg.connect(url) as conn:
            states: dict[str, str] = dict(conn.execute(
                "SELECT job_id, state FROM sidecar.sidecar_backfill_batches WHERE run_id = %s",
                (run.id,)).fetchall())
        assert [states[j] for j in in_flight] == ["done"]
        assert queue(res.redis, res.settings, "backfill").failed_job_registry.count == 0
        _wait("the index job", lambda: (run_record(res, run.id).index_status or "")
              .startswith("built"), timeout=60, workers=[second])
        assert run_record(res, run.id).index_status == \
            f"built: {index_name(res.model.id, 1, 'halfvec')}"

        _events_on_a_live_worker(res, second)
    finally:
        res.close()


def _events_on_a_live_worker(res: Resources, worker: Any) -> None:
    from sidecar.api.app import create_app

    url = owner_url(res.urls.database_url)
    api = create_app(res.settings, res).test_client()
    before = dict(vector_rows(url, res.model.id))
    edited, deleted = sorted(before)[10], sorted(before)[20]

    with psycopg.connect(url) as conn:
        conn.execute("UPDATE posts SET cooked = cooked || '<p>Update: replaced the SATA "
                     "cable, errors gone.</p>', updated_at = now() AT TIME ZONE 'utc'"
                     " WHERE id = %s", (edited,))
    resp = api.post("/v1/index/events", json={"event": "post_edited", "ids": [edited]},
                    headers=AUTH)
    assert resp.status_code == 202 and resp.json is not None and resp.json["job_ids"]
    _wait("the edit to be embedded",
          lambda: dict(vector_rows(url, res.model.id))[edited] != before[edited],
          timeout=60, workers=[worker])
    after = dict(vector_rows(url, res.model.id))
    assert {p for p in after if after[p] != before[p]} == {edited}

    again = driver.start_run(res)
    _wait("the second run", lambda: run_record(res, again.id).status == "finished",
          timeout=60, workers=[worker])
    second = run_record(res, again.id)
    assert (second.stop_reason, second.budgeted, second.done) == ("done", 0, 0)
    assert dict(vector_rows(url, res.model.id)) == after

    with psycopg.connect(url) as conn:
        conn.execute("UPDATE posts SET deleted_at = now() AT TIME ZONE 'utc' WHERE id = %s",
                     (deleted,))
    resp = api.post("/v1/index/events", json={"event": "post_deleted", "ids": [deleted]},
                    headers=AUTH)
    assert resp.status_code == 202 and resp.json is not None
    assert resp.json["vectors_removed"] == 1
    assert deleted not in dict(vector_rows(url, res.model.id))
