"""The SQL rule of `make lint`: SQL runs in sidecar/db/ only (scripts/check_sql.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

from tests.helpers import REPO as ROOT
from tests.helpers import load_script


def _checker() -> ModuleType:
    return load_script("check_sql")


def _flagged(tmp_path: Path, source: str) -> list[str]:
    path = tmp_path / "mod.py"
    path.write_text(source)
    return [line.split(": ", 1)[1] for line in _checker().outside(path)]


def test_queries_and_cursors_outside_the_layer_are_flagged(tmp_path: Path) -> None:
    source = ("def f(conn):\n    conn.execute('SELECT 1')\n"
              "    with conn.cursor() as cur:\n        cur.executemany('INSERT', [])\n")
    assert _flagged(tmp_path, source) == [".execute()", ".cursor()", ".executemany()"]
    assert _flagged(tmp_path, "from psycopg import sql\n") == ["from psycopg import sql"]
    assert _flagged(tmp_path, "import psycopg.sql\n") == ["import psycopg.sql"]


def test_calls_that_are_not_sql_pass(tmp_path: Path) -> None:
    # A Redis pipeline's execute takes no query; opening a connection is not SQL.
    source = ("import psycopg\ndef f(pipe, url):\n    pipe.execute()\n"
              "    return psycopg.connect(url)\n")
    assert _flagged(tmp_path, source) == []


def test_the_layer_and_the_allowed_paths_are_not_checked() -> None:
    checker = _checker()
    assert checker.outside(Path("sidecar/db/embeddings.py")) == []
    assert all(reason for reason in checker.ALLOWED.values())


def test_the_project_follows_the_rule() -> None:
    done = subprocess.run([sys.executable, "scripts/check_sql.py"], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
