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

from sidecar.db.grants import FORUM_READS, READS, check_role, grants_script
from sidecar.db.grants_check import check_grants
from sidecar.db.meta import get_meta
from sidecar.db.migrate import REQUIRED_FORUM_COLUMNS, check_current, upgrade
from sidecar.db.schema import with_search_path
from sidecar.errors import ConfigurationError, InvalidInput
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
        "discourse_solved_solved_topics", "discourse_solved_topic_answers", "topic_custom_fields",
        "embedding_definitions"}
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
    # Nothing to create in the forum's schema; its own schema instead, and its search path
    # set on the role, never on the database (the forum's role must never search it).
    assert "CREATE ON SCHEMA public" not in script.replace("REVOKE CREATE ON SCHEMA %I", "")
    assert 'CREATE SCHEMA IF NOT EXISTS sidecar AUTHORIZATION "sidecar"' in script
    assert "ALTER DATABASE" not in script
    assert 'ALTER ROLE "sidecar" SET search_path = sidecar, public' in script


def test_a_role_name_is_matched_whole() -> None:
    assert check_role("sidecar") == "sidecar"
    for bad in ("sidecar\n", "sidecar\n; DROP TABLE posts", "Sidecar", "1sidecar", "a" * 64):
        with pytest.raises(InvalidInput):
            check_role(bad)


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


def test_the_role_may_create_nothing_in_the_forum_s_schema(forum: str) -> None:
    # CVE-2018-1058: a function planted where the forum's role searches would run as that role.
    with psycopg.connect(forum, autocommit=True) as conn:
        for denied in ("CREATE FUNCTION public.lower(varchar) RETURNS text LANGUAGE sql"
                       " AS 'SELECT ''x''::text'",
                       "CREATE TABLE public.schema_migrations_ahead (id int)",
                       "CREATE SCHEMA planted"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(denied)
        assert conn.execute("SELECT has_schema_privilege('public', 'CREATE'),"
                            " has_schema_privilege('sidecar', 'CREATE')").fetchone() \
            == (False, True)
        # Its own tables are in its own schema, and nothing of it in the forum's.
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                            " AND (tablename LIKE 'sidecar%' OR tableowner = 'sidecar')"
                            ).fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'sidecar'"
                            " AND tableowner = 'sidecar'").fetchone()[0] > 5  # type: ignore[index]


def test_the_forum_s_role_never_searches_the_sidecar_s_schema(forum: str) -> None:
    owner = owner_url(forum)
    with psycopg.connect(owner, autocommit=True) as conn:
        settings = conn.execute(
            "SELECT coalesce(r.rolname, '*'), s.setconfig FROM pg_db_role_setting s"
            " LEFT JOIN pg_roles r ON r.oid = s.setrole"
            " WHERE s.setdatabase IN (0, (SELECT oid FROM pg_database"
            "                            WHERE datname = current_database()))").fetchall()
        path = conn.execute("SHOW search_path").fetchone()
    searching = {who for who, config in settings
                 if any(c.startswith("search_path=") and "sidecar" in c for c in config)}
    assert searching == {"sidecar"}, settings  # the role's own setting, nobody else's
    assert path == ('"$user", public',)


def test_nothing_in_the_forum_s_schema_stands_in_for_a_sidecar_table(forum: str) -> None:
    owner = owner_url(forum)
    with psycopg.connect(owner, autocommit=True) as conn:
        conn.execute("CREATE TABLE public.sidecar_meta (key text, value text)")
        conn.execute("INSERT INTO public.sidecar_meta VALUES ('keyword_index_id', 'planted')")
    try:
        with psycopg.connect(with_search_path(forum), row_factory=psycopg.rows.dict_row) as conn:
            assert get_meta(conn, "keyword_index_id") not in (None, "planted")
        with psycopg.connect(forum, row_factory=psycopg.rows.dict_row) as conn:  # psql's path
            assert get_meta(conn, "keyword_index_id") not in (None, "planted")
    finally:
        with psycopg.connect(owner, autocommit=True) as conn:
            conn.execute("DROP TABLE public.sidecar_meta")


def test_create_on_the_forum_s_schema_is_flagged_and_taken_back(forum: str) -> None:
    owner = owner_url(forum)
    with psycopg.connect(owner, autocommit=True) as conn:
        conn.execute("GRANT CREATE ON SCHEMA public TO sidecar")
    with psycopg.connect(forum, autocommit=True) as conn:
        conn.execute("CREATE FUNCTION public.lower(varchar) RETURNS text LANGUAGE sql"
                     " AS 'SELECT ''x''::text'")
        report = check_grants(conn)
    try:
        assert any(e.startswith("CREATE on schema public") for e in report.excessive), report
        assert any("public.lower(character varying)" in e for e in report.excessive), report
        sidecar_url(forum)  # the grants again: CREATE on public is taken back
        with psycopg.connect(forum) as conn:
            again = check_grants(conn)
        assert not any(e.startswith("CREATE on schema") for e in again.excessive), again
    finally:
        with psycopg.connect(owner, autocommit=True) as conn:
            conn.execute("DROP FUNCTION public.lower(varchar)")
    with psycopg.connect(forum) as conn:
        assert check_grants(conn).ok


def test_an_older_install_moves_its_tables_with_the_grants_then_the_upgrade(
    pg_admin_url: str,
) -> None:
    url = new_database(pg_admin_url, "t_legacy")
    try:
        import_demo(url)
        role = sidecar_url(url)
        upgrade(role)
        owner = owner_url(url)
        with psycopg.connect(with_search_path(role)) as conn:
            conn.execute("INSERT INTO sidecar_meta VALUES ('kept', 'yes')")
        # What versions before the schema of their own left: the role's tables in public, CREATE
        # on public, and ai_posts_embeddings the role's.
        with psycopg.connect(owner, autocommit=True) as conn:
            conn.execute("""
                DO $$ DECLARE t record; BEGIN
                  FOR t IN SELECT c.relname, c.relkind FROM pg_class c
                      JOIN pg_namespace n ON n.oid = c.relnamespace
                      WHERE n.nspname = 'sidecar' AND c.relkind IN ('r', 'S')
                        AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = c.oid
                                        AND d.classid = 'pg_class'::regclass
                                        AND d.deptype IN ('a', 'i'))
                  LOOP
                    EXECUTE format('ALTER %s sidecar.%I SET SCHEMA public',
                                   CASE t.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
                                   t.relname);
                  END LOOP;
                END $$;
                DROP SCHEMA sidecar;
                GRANT CREATE ON SCHEMA public TO sidecar;
                ALTER TABLE ai_posts_embeddings OWNER TO sidecar""")
        with pytest.raises(ConfigurationError, match="sidecar db grants"):
            upgrade(role)  # no schema of its own yet, and it may not make one
        sidecar_url(url)  # 1. the new grants, as a superuser
        with psycopg.connect(role) as conn:
            report = check_grants(conn)
        assert any("still in the forum's schema" in m for m in report.missing), report
        info = upgrade(role)  # 2. `sidecar db upgrade` moves them
        assert info["applied"] == [] and "sidecar_meta" in info["moved"]  # type: ignore[operator]
        check_current(role)
        with psycopg.connect(role) as conn:
            report = check_grants(conn)
            assert report.ok, report.as_dict()
            assert conn.execute("SELECT value FROM sidecar_meta WHERE key = 'kept'"
                                ).fetchone() == ("yes",)
            assert conn.execute("SELECT pg_get_userbyid(relowner) <> 'sidecar' FROM pg_class"
                                " WHERE oid = 'public.ai_posts_embeddings'::regclass"
                                ).fetchone() == (True,)
    finally:
        drop_database(pg_admin_url, url)


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


def test_create_given_to_public_is_said_by_the_grants_and_the_check(forum: str) -> None:
    """Fault (issue 45): PostgreSQL 14 and older give CREATE on public to PUBLIC, so to the
    sidecar's role too, which the grants cannot take back from it alone: `sidecar db grants`
    ran through it silently."""
    owner = owner_url(forum)
    revoke = "REVOKE CREATE ON SCHEMA public FROM PUBLIC"
    script = subprocess.run([*sidecar_command(), "db", "grants"], capture_output=True,
                            text=True, timeout=120).stdout

    def run_grants() -> str:
        done = subprocess.run(["psql", "-X", "-v", "ON_ERROR_STOP=1", "-d", owner, "-f", "-"],
                              input=script, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stderr

    with psycopg.connect(owner, autocommit=True) as conn:
        conn.execute("GRANT CREATE ON SCHEMA public TO PUBLIC")  # as PostgreSQL 14 has it
    try:
        said = run_grants()
        assert "WARNING:  PUBLIC may create in the schema public" in said, said
        assert revoke in said
        code, report = _check_cli(forum)
        assert code == 1
        assert any("through PUBLIC" in e and revoke in e for e in report["excessive"]), report
        upgraded = subprocess.run([*sidecar_command(), "db", "upgrade", "--as-owner"],
                                  capture_output=True, text=True, timeout=300,
                                  env={**os.environ, "DATABASE_URL": owner})
        assert upgraded.returncode == 0, upgraded.stderr
        assert [revoke in w for w in json.loads(upgraded.stdout)["warnings"]] == [True]
    finally:
        with psycopg.connect(owner, autocommit=True) as conn:
            conn.execute(revoke)
    assert "WARNING" not in run_grants()
    code, report = _check_cli(forum)
    assert code == 0, report
