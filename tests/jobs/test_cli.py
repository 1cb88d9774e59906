"""`sidecar backfill` (queued and --sync), `status`, `pause`, `resume`, `stop`, `sidecar queues`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from sidecar.cli.main import main
from tests.jobs.conftest import public_post_ids, start_state


@pytest.fixture
def cli(tmp_path: Path, db_url: str, redis_client: Any, redis_url: str, minilm: Any,
        minilm_dir: Path) -> Any:
    """Run `sidecar ...` in-process against a demo forum (nothing embedded yet)."""
    res = start_state(tmp_path, db_url, redis_url, minilm)
    res.close()
    env = {"DATABASE_URL": db_url, "REDIS_URL": redis_url,
           "SIDECAR_STATE_DIR": str(tmp_path / "state"),
           "SIDECAR_EMBED_MODEL_PATH": str(minilm_dir), "SIDECAR_LOG_LEVEL": "WARNING"}

    def run(*args: str) -> Result:
        return CliRunner().invoke(main, list(args), env=env)

    return run


def _json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # progress and notices go to stderr


def test_queued_run_and_its_operator_commands(cli: Any) -> None:
    queued = cli("backfill", "--budget", "10", "--until", "23:59", "--no-wait", "--json")
    run = _json(queued)
    assert (run["status"], run["budget"]) == ("planning", 10) and run["deadline"]
    assert "no worker listens" in queued.stderr

    refused = cli("backfill")
    assert refused.exit_code == 2 and f"run #{run['id']} is planning" in refused.output

    assert _json(cli("backfill", "status", "--json"))["id"] == run["id"]
    assert _json(cli("backfill", "pause", "--json"))["status"] == "paused"
    assert _json(cli("backfill", "resume", "--json"))["status"] == "planning"
    stopped = _json(cli("backfill", "stop", "--json"))
    assert (stopped["status"], stopped["stop_reason"]) == ("finished", "cancelled")
    again = cli("backfill", "stop")
    assert again.exit_code == 2 and "already finished" in again.output

    queues = _json(cli("queues"))
    assert queues["queues"]["sidecar-backfill"]["queued"] == 1  # the plan job, never worked


def test_sync_backfill_with_a_budget(cli: Any, db_url: str) -> None:
    run = _json(cli("backfill", "--sync", "--budget", "5", "--json"))
    assert (run["status"], run["stop_reason"], run["done"]) == ("finished", "budget", 5)
    assert run["not_planned"] == len(public_post_ids(db_url)) - 5
    listed = _json(cli("backfill", "status", "--all", "--json"))
    assert [r["id"] for r in listed] == [run["id"]]


@pytest.mark.parametrize(("args", "message"), [
    (("backfill", "--until", "25:00", "--no-wait"), "HH:MM"),
    (("backfill", "--budget", "0"), "x>=1"),
    (("backfill", "--strategy", "3"), "1<=x<=2"),
    (("backfill", "--budget", "5", "status"), "without a subcommand"),
    (("backfill", "status", "--run", "999"), "no backfill run #999"),
])
def test_bad_backfill_commands_exit_2_with_a_reason(cli: Any, args: tuple[str, ...],
                                                     message: str) -> None:
    result = cli(*args)
    assert result.exit_code == 2 and message in result.output
