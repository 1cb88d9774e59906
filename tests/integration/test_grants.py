"""The least-privilege role: its SQL, what it may not do, and `sidecar db check-grants`."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from sidecar.db.grants import FORUM_READS, READS, grants_script
from sidecar.db.grants_check import check_grants
from sidecar.db.migrate import REQUIRED_FORUM_COLUMNS
from sidecar.errors import InvalidInput
from tests.conftest import drop_database, import_demo, new_database, owner_url, sidecar_url
from tests.helpers import sidecar_command

DB = Path(__file__).resolve().parents[2] / "sidecar" / "db"


@pytest.fixture(scope="module")
def forum(pg_admin_url: str) -> Iterator[str]:
    """The demo forum, the owner's, with the sidecar's schema: the sidecar role's URL."""
    url = new_database(pg_admin_url, "t_grants")
    import_demo(url)
    try:
        yield sidecar_url(url)
    finally:
        drop_database(pg_admin_url, url)


def test_the_map_grants_every_column_the_start_up_check_requires() -> None:
    for table, columns in REQUIRED_FORUM_COLUMNS.items():
        assert set(columns) <= set(READS[table].columns), table


def test_the_map_names_every_discourse_table_a_query_reads() -> None:
    # Discourse's tables, as the owned forum's migrations make them, and the plugins' the
    # sidecar knows: any of them that a query of sidecar/db/ reads must be in the map (the
    # importer's writes, forum_write.py, are the owner's).
    made = "\n".join(p.read_text() for p in (DB / "migrations" / "forum").glob("*.sql"))
    discourse = set(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", made)) | {
        "discourse_solved_solved_topics", "topic_custom_fields", "embedding_definitions"}
    read = set()
    for path in DB.glob("*.py"):
        if path.name not in {"forum_write.py", "grants.py", "grants_check.py"}:
            read |= set(re.findall(r"\b(?:FROM|JOIN)\s+(\w+)", path.read_text()))
    assert read & discourse, "no query found"
    assert read & discourse <= set(READS), (read & discourse) - set(READS)


def test_the_script_is_one_transaction_of_column_grants() -> None:
    script = grants_script("sidecar")
    assert script.count("BEGIN;") == 1 and script.rstrip().endswith("COMMIT;")
    assert "CONCURRENTLY" not in script
    for read in FORUM_READS:
        assert f"ON public.{read.table}" in script
    assert "GRANT SELECT ON" not in script  # never a whole Discourse table
    with pytest.raises(InvalidInput):
        grants_script("sidecar; DROP TABLE posts")


def test_the_role_reads_only_its_columns_and_writes_nothing_of_the_forum(forum: str) -> None:
    with psycopg.connect(forum, autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM posts WHERE raw <> ''").fetchone()
        for denied in ("SELECT username FROM users", "SELECT last_version_at FROM posts",
                       "SELECT id, created_at FROM search_logs",
                       "INSERT INTO categories (id, name, name_lower, slug, created_at,"
                       " updated_at) VALUES (999, 'x', 'x', 'x', now(), now())",
                       "UPDATE posts SET raw = 'x' WHERE id = 1", "DELETE FROM topics",
                       "TRUNCATE post_search_data", "ALTER TABLE posts ADD COLUMN x int",
                       "DROP TABLE tags"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(denied)


def test_the_role_passes_its_own_check(forum: str) -> None:
    with psycopg.connect(forum) as conn:
        report = check_grants(conn)
    assert report.role == "sidecar"
    assert report.ok, report.as_dict()


def test_a_superuser_is_flagged(pg_admin_url: str, forum: str) -> None:
    with psycopg.connect(owner_url(forum)) as conn:
        report = check_grants(conn)
    assert not report.ok
    assert any(e.startswith("superuser") for e in report.excessive), report.excessive


def _check_cli(url: str) -> tuple[int, dict[str, object]]:
    done = subprocess.run([*sidecar_command(), "db", "check-grants"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "DATABASE_URL": url})
    return done.returncode, json.loads(done.stdout)


def test_a_missing_grant_and_a_write_are_flagged(forum: str) -> None:
    owner = owner_url(forum)
    with psycopg.connect(owner) as conn:
        conn.execute("REVOKE SELECT (raw) ON posts FROM sidecar")
        conn.execute("GRANT INSERT ON posts TO sidecar")
    try:
        code, report = _check_cli(forum)
        assert code == 1
        assert any(m.startswith("SELECT (raw) on posts") for m in report["missing"]), report
        assert "INSERT on posts" in report["excessive"], report
    finally:
        with psycopg.connect(owner) as conn:
            conn.execute("REVOKE INSERT ON posts FROM sidecar")
            conn.execute("GRANT SELECT (raw) ON posts TO sidecar")
    code, report = _check_cli(forum)
    assert code == 0 and report["ok"] is True, report


def test_running_the_grants_again_takes_back_what_they_do_not_give(forum: str) -> None:
    owner = owner_url(forum)
    with psycopg.connect(owner) as conn:
        conn.execute("GRANT SELECT ON users TO sidecar")
    with psycopg.connect(forum) as conn:
        assert any(e.startswith("SELECT on users beyond") for e in check_grants(conn).excessive)
    sidecar_url(forum)  # the same SQL, run again
    with psycopg.connect(forum) as conn:
        assert check_grants(conn).ok
