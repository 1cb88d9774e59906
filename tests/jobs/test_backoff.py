"""The backfill yields to a busy forum database, says so, and goes on once it is quiet."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from jobs import driver
from jobs.backoff import DatabaseBusy
from jobs.batch import run_sync
from models import DummyEmbedder
from sidecar.db.backfill_runs import RunStatus
from tests.conftest import API_KEY
from tests.jobs.conftest import run_record, start_state

# Any connection at all is "too many": the limit every test database passes.
BUSY = {"backfill_max_connections_pct": 0.001, "backfill_busy_check_s": 0.05,
        "backfill_busy_max_wait_s": 0.2}


def test_a_busy_database_holds_the_run_and_says_why(tmp_path: Path, db_url: str,
                                                    redis_client: Any, redis_url: str) -> None:
    res = start_state(tmp_path, db_url, redis_url, DummyEmbedder(dimensions=32), **BUSY)
    try:
        run = driver.start_run(res, enqueue=False)
        with pytest.raises(DatabaseBusy, match="connections in use"):
            run_sync(res, run.id)
        held = run_record(res, run.id)
        assert held.status == RunStatus.PLANNING and held.budgeted == 0  # nothing planned
        assert held.waiting_since is not None and "connections in use" in held.waiting_reason
        assert held.as_dict()["waiting_reason"] == held.waiting_reason
        # What Prometheus reads from the API meanwhile.
        from sidecar.api.app import create_app

        metrics = create_app(res.settings, res).test_client().get(
            "/metrics", headers={"Authorization": f"Bearer {API_KEY}"}).get_data(as_text=True)
        assert f'sidecar_backfill_waiting_seconds{{model="{res.model.name}",strategy="1"}}' \
            in metrics
        assert f'sidecar_backfill_run_state{{model="{res.model.name}",state="planning",' \
               f'strategy="1"}} 1.0' in metrics
        # Quiet again (the limits lifted): the same run plans, embeds, and stops waiting.
        quiet = dataclasses.replace(res, settings=res.settings.model_copy(
            update={"backfill_max_connections_pct": 0.0}))
        done = run_sync(quiet, run.id)
        assert (done.status, done.stop_reason) == (RunStatus.FINISHED, "done")
        assert done.done > 0 and done.waiting_since is None and done.waiting_reason is None
    finally:
        res.close()


def test_batches_given_up_to_a_busy_database_never_pause_the_run(dummy_res: Any) -> None:
    from jobs import planner
    from jobs.batch import give_up_batch
    from jobs.runs import change_status

    def give_up_three(exc: Exception) -> Any:
        run = driver.start_run(dummy_res, enqueue=False)
        assert planner.plan_run(dummy_res, run.id).status == RunStatus.RUNNING
        for seq in range(3):  # as many as SIDECAR_BACKFILL_PAUSE_AFTER_ERRORS
            give_up_batch(dummy_res, run.id, seq, exc, None)
        return run_record(dummy_res, run.id)

    held = give_up_three(DatabaseBusy("busy for 900 s"))
    assert (held.status, held.consecutive_errors) == (RunStatus.RUNNING, 0)
    assert held.failed == 3 * dummy_res.settings.backfill_batch_size
    with dummy_res.db.connection() as conn:
        change_status(conn, held.id, "stop")
    # The same three batches given up to anything else pause the run.
    other = give_up_three(RuntimeError("the model host answered 500"))
    assert (other.status, other.consecutive_errors) == (RunStatus.PAUSED, 3)
