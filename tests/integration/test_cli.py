"""The command line on real services: db upgrade, import with rejected rows, search."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from sidecar.cli import main
from tests.helpers import category, post, topic, write_dump


def env_for(db_url: str, redis_url: str, tmp_path: Path) -> dict[str, str]:
    return {"DATABASE_URL": db_url, "REDIS_URL": redis_url,
            "SIDECAR_STATE_DIR": str(tmp_path / "state"), "SIDECAR_LOG_LEVEL": "WARNING"}


def test_db_upgrade_is_idempotent(db_url: str, redis_url: str, tmp_path: Path) -> None:
    runner = CliRunner()
    first = runner.invoke(main, ["db", "upgrade"], env=env_for(db_url, redis_url, tmp_path))
    assert first.exit_code == 0, first.output
    assert "forum/0001_forum_tables" in json.loads(first.output)["applied"]
    second = runner.invoke(main, ["db", "upgrade"], env=env_for(db_url, redis_url, tmp_path))
    assert json.loads(second.output)["applied"] == []


def test_import_reports_counts_and_rejected_rows(db_url: str, redis_url: str,
                                                 tmp_path: Path) -> None:
    dump = write_dump(tmp_path / "dump", [category(1, "General")],
                      [topic(5, "Hello", 1)],
                      [post(50, 5, 1, "first post"), post(51, 99, 1, "orphan")])
    runner = CliRunner()
    result = runner.invoke(main, ["import", str(dump)], env=env_for(db_url, redis_url, tmp_path))
    assert result.exit_code == 0, result.output
    counts = json.loads(result.stdout)
    assert counts["posts"]["inserted"] == 1 and counts["posts"]["rejected"] == 1
    assert "rejected posts.jsonl:2: unknown topic_id 99" in result.stderr
    strict = runner.invoke(main, ["import", "--strict", str(dump)],
                           env=env_for(db_url, redis_url, tmp_path))
    assert strict.exit_code == 1


def test_a_database_without_pgvector_stops_with_one_clear_line(tmp_path: Path,
                                                               redis_url: str) -> None:
    import psycopg
    import pytest

    url = "postgresql://postgres@127.0.0.1:5432/postgres"
    try:
        psycopg.connect(url, connect_timeout=2).close()
    except psycopg.OperationalError:
        pytest.skip("no PostgreSQL on 127.0.0.1:5432")
    result = CliRunner().invoke(main, ["db", "upgrade"], env=env_for(url, redis_url, tmp_path))
    if result.exit_code == 0:
        pytest.skip("that server has pgvector")
    assert result.exit_code == 2
    assert "pgvector >= 0.7" in result.stderr and "Traceback" not in result.output
