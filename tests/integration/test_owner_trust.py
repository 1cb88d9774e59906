"""The owner step trusts nothing the sidecar's role made (issue 45, the high finding).

`sidecar db upgrade --as-owner` and the SQL of `sidecar db owner-sql` (and of `sidecar db
grants`) run as a superuser or the forum's owner. The least-privilege role owns the schema
``sidecar`` and may plant there whatever it likes: operators for the type pairs the owner's
queries compare, functions named like built-ins, views named like catalogs or in place of its
own tables, index expressions. Each planted function records ``current_user`` in a table the role
owns and, run by a superuser, makes the role one. Whatever the owner's URL says about the search
path, none of them may run as the owner.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from sidecar.db.embeddings import EmbeddingRow, register_model, upsert_embeddings
from sidecar.db.schema import with_search_path
from sidecar.db.vector_index import index_name
from tests.conftest import (
    SIDECAR_ROLE,
    drop_database,
    import_demo,
    new_database,
    owner_url,
    sidecar_url,
)
from tests.helpers import sidecar_command

# The search path an owner's URL (or PGOPTIONS, or the owner's role setting) might carry: the
# role's schema first, before PostgreSQL's own catalogue.
HOSTILE_PATH = "-c search_path=sidecar,pg_catalog,public"

_LOG = f"""
CREATE TABLE sidecar.planted_log (who text NOT NULL, what text NOT NULL);
GRANT INSERT ON sidecar.planted_log TO PUBLIC;
CREATE FUNCTION sidecar.planted(what text) RETURNS boolean LANGUAGE plpgsql
SET search_path = pg_catalog AS $$
BEGIN
  INSERT INTO sidecar.planted_log VALUES (current_user, what);
  IF (SELECT r.rolsuper FROM pg_catalog.pg_roles r
      WHERE r.rolname OPERATOR(pg_catalog.=) current_user) THEN
    EXECUTE 'ALTER ROLE {SIDECAR_ROLE} SUPERUSER';
  END IF;
  RETURN true;
END $$;
CREATE FUNCTION sidecar.planted_int(v bigint) RETURNS bigint LANGUAGE plpgsql IMMUTABLE
SET search_path = pg_catalog AS $$
BEGIN PERFORM sidecar.planted('index expression'); RETURN v; END $$;
"""
# (left, right, the type both are compared as): every pair the owner's statements compare, and
# the pairs a role type (regrole, regclass, regnamespace) makes an exact match for.
_PAIRS = (
    ("oid", "regrole", "oid"), ("regrole", "oid", "oid"), ("oid", "regclass", "oid"),
    ("regclass", "oid", "oid"), ("oid", "regnamespace", "oid"), ("oid", "oid", "oid"),
    ("name", "text", "text"), ("text", "name", "text"), ("name", "name", "name"),
    ("text", "text", "text"), ("bigint", "integer", "bigint"), ("integer", "bigint", "bigint"),
    ("bigint", "bigint", "bigint"), ("integer", "integer", "integer"),
    ("smallint", "integer", "integer"), ('"char"', '"char"', '"char"'),
    ("boolean", "boolean", "boolean"),
)
_OPS = ("=", "<>", "<", ">", "<=", ">=")
_LIKE = ("~~", "!~~")
# Functions named like built-ins: the same signatures (found first where the role's schema comes
# before pg_catalog) and closer matches (found first wherever the role's schema is searched).
_FUNCTIONS = (
    ("format", "f text, a name", "text", "pg_catalog.format(f, a)"),
    ("format", "f text, a text", "text", "pg_catalog.format(f, a)"),
    ("format", "f text, a name, b name", "text", "pg_catalog.format(f, a, b)"),
    ("format", "f text, a text, b name, c name", "text", "pg_catalog.format(f, a, b, c)"),
    ("quote_ident", "a name", "text", "pg_catalog.quote_ident(a)"),
    ("quote_ident", "a text", "text", "pg_catalog.quote_ident(a)"),
    ("to_regclass", "a text", "regclass", "pg_catalog.to_regclass(a)"),
    ("pg_get_userbyid", "a oid", "name", "pg_catalog.pg_get_userbyid(a)"),
    ("pg_has_role", "a oid, b text", "boolean", "pg_catalog.pg_has_role(a, b)"),
    ("pg_has_role", "a name, b oid, c text", "boolean", "pg_catalog.pg_has_role(a, b, c)"),
    ("has_schema_privilege", "a text, b text", "boolean",
     "pg_catalog.has_schema_privilege(a, b)"),
    ("has_schema_privilege", "a oid, b text", "boolean",
     "pg_catalog.has_schema_privilege(a, b)"),
    ("current_database", "", "name", "pg_catalog.current_database()"),
    ("set_config", "a text, b text, c boolean", "text", "pg_catalog.set_config(a, b, c)"),
    ("lower", "a text", "text", "pg_catalog.lower(a)"),
    ("vector_dims", "a public.halfvec", "integer", "public.vector_dims(a)"),
    ("binary_quantize", "a public.halfvec", "bit", "public.binary_quantize(a)"),
    ("halfvec", "a public.halfvec, b integer, c boolean", "public.halfvec",
     "public.halfvec(a, b, c)"),
)
# Views named like the catalogues the owner's statements read.
_CATALOGS = ("pg_class", "pg_namespace", "pg_index", "pg_indexes", "pg_extension", "pg_roles",
             "pg_attribute", "pg_depend", "pg_tables", "pg_proc", "pg_trigger")


def planted_sql() -> str:
    """Everything the role plants in its own schema (run as the role)."""
    out = [_LOG]
    n = 0
    for left, right, common in _PAIRS:
        ops = _OPS + (_LIKE if common in ("text", "name") else ())
        for op in ops:
            n += 1
            out.append(
                f"CREATE FUNCTION sidecar.planted_op_{n}(a {left}, b {right}) RETURNS boolean"
                f" LANGUAGE plpgsql SET search_path = pg_catalog AS $$ BEGIN"
                f" PERFORM sidecar.planted('operator {op}({left}, {right})');"
                f" RETURN a::{common} OPERATOR(pg_catalog.{op}) b::{common}; END $$;"
                f" CREATE OPERATOR sidecar.{op} (LEFTARG = {left}, RIGHTARG = {right},"
                f" FUNCTION = sidecar.planted_op_{n});")
    for name, args, returns, call in _FUNCTIONS:
        out.append(f"CREATE FUNCTION sidecar.{name}({args}) RETURNS {returns} LANGUAGE sql"
                   f" SET search_path = pg_catalog AS $$ SELECT sidecar.planted('function"
                   f" {name}({args})'); SELECT {call} $$;")
    for catalog in _CATALOGS:
        columns = ("attrelid, attname, atttypid, attnum, attisdropped"
                   if catalog == "pg_attribute" else "*")  # attmissingval: no view takes it
        out.append(f"CREATE VIEW sidecar.{catalog} AS SELECT {columns} FROM pg_catalog.{catalog}"
                   f" WHERE sidecar.planted('view {catalog}');")
    # A view in place of the table the owner read (the model registry), one in front of the
    # forum's vectors' table, and an index expression on the role's table.
    out.append("""
        ALTER TABLE sidecar.sidecar_embedding_models RENAME TO sidecar_embedding_models_t;
        CREATE VIEW sidecar.sidecar_embedding_models AS SELECT * FROM
            sidecar.sidecar_embedding_models_t WHERE sidecar.planted('view of the registry');
        CREATE VIEW sidecar.ai_posts_embeddings AS SELECT * FROM public.ai_posts_embeddings
            WHERE sidecar.planted('view of ai_posts_embeddings');
        CREATE INDEX planted_expression ON sidecar.sidecar_embedding_models_t
            ((sidecar.planted_int(id)));
    """)
    return "\n".join(out)


def _ran_as_owner(role: str) -> tuple[bool, list[tuple[str, str]]]:
    """(the role is a superuser now, what planted code ran as anyone but the role)."""
    with psycopg.connect(owner_url(role)) as conn:
        superuser = conn.execute("SELECT rolsuper FROM pg_roles WHERE rolname = %s",
                                 (SIDECAR_ROLE,)).fetchone()
        ran = conn.execute("SELECT DISTINCT who, what FROM sidecar.planted_log"
                           " WHERE who <> %s ORDER BY 1, 2", (SIDECAR_ROLE,)).fetchall()
    return bool(superuser and superuser[0]), [(str(w), str(x)) for w, x in ran]


def _vectors(role: str) -> int:
    """A model of three dimensions with a vector per post (as the backfill writes them)."""
    with psycopg.connect(with_search_path(role), row_factory=dict_row) as conn:
        register_vector(conn)
        model = register_model(conn, name="planted-m", dimensions=3, version=1)
        upsert_embeddings(conn, model, 1, 1, [
            EmbeddingRow(post_id, "d", np.array([1.0, post_id, 0.5], np.float32))
            for post_id in (1, 2, 3)])
    return model.id


@pytest.fixture
def planted(pg_admin_url: str) -> Iterator[tuple[str, int]]:
    """The demo forum beside the role's vectors, and the role's traps: the role's URL and its
    model's id."""
    url = new_database(pg_admin_url, "t_planted")
    try:
        import_demo(url)
        role = sidecar_url(url)
        model_id = _vectors(role)
        with psycopg.connect(role, autocommit=True) as conn:
            conn.execute(planted_sql().encode())
        yield role, model_id
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(f"ALTER ROLE {SIDECAR_ROLE} NOSUPERUSER")  # type: ignore[arg-type]
        drop_database(pg_admin_url, url)


def _hostile(url: str) -> str:
    return make_conninfo(owner_url(url), options=HOSTILE_PATH)


def _index_valid(role: str, name: str) -> bool | None:
    with psycopg.connect(owner_url(role)) as conn:
        row = conn.execute(
            "SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid"
            " WHERE i.indrelid = 'public.ai_posts_embeddings'::regclass AND c.relname = %s",
            (name,)).fetchone()
    return None if row is None else bool(row[0])


def test_the_owner_step_runs_nothing_the_role_planted(planted: tuple[str, int]) -> None:
    """Fault (issue 45): the owner's session searched the role's schema first, so the role's
    ``<>(oid, regrole)`` in the grants ran as the superuser and made the role one."""
    role, model_id = planted
    done = subprocess.run([*sidecar_command(), "db", "upgrade", "--as-owner", "--role",
                           SIDECAR_ROLE], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "DATABASE_URL": _hostile(role)})
    superuser, ran = _ran_as_owner(role)
    assert not superuser, ran
    assert ran == [], ran
    assert done.returncode == 0, done.stderr
    assert _index_valid(role, index_name(model_id, 1, "halfvec")) is True  # and it did its work


def test_the_owner_sql_runs_nothing_the_role_planted_through_psql(
        planted: tuple[str, int]) -> None:
    """The printed scripts pin the search path first: the owner's own session may search the
    role's schema (here PGOPTIONS)."""
    role, model_id = planted
    env = {**os.environ, "PGOPTIONS": HOSTILE_PATH}
    scripts, runs = [], []
    for command, url in ((["db", "grants", "--role", SIDECAR_ROLE], owner_url(role)),
                         (["db", "owner-sql"], role)):
        made = subprocess.run([*sidecar_command(), *command], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "DATABASE_URL": url})
        assert made.returncode == 0, made.stderr
        scripts.append(made.stdout)
        runs.append(subprocess.run(["psql", "-X", "-v", "ON_ERROR_STOP=1", "-d",
                                    owner_url(role), "-f", "-"], input=made.stdout,
                                   capture_output=True, text=True, timeout=300, env=env))
    superuser, ran = _ran_as_owner(role)
    assert not superuser, ran
    assert ran == [], ran
    assert [r.returncode for r in runs] == [0, 0], [r.stderr for r in runs]
    assert _index_valid(role, index_name(model_id, 1, "halfvec")) is True
    # Each script pins the search path before anything else.
    grants, owner = (_statements(script) for script in scripts)
    assert grants[:2] == ["BEGIN", "SET LOCAL search_path = pg_catalog, pg_temp"], grants[:2]
    assert owner[0] == "SET search_path = pg_catalog, pg_temp", owner[:2]


def _statements(script: str) -> list[str]:
    """A script's statements, comments left out."""
    text = "\n".join(line for line in script.splitlines() if not line.startswith("--"))
    return [s.strip() for s in text.split(";") if s.strip()]


def _legacy(url: str) -> None:
    """What versions before the schema of their own left: ai_posts_embeddings the role's, and
    CREATE on the forum's schema."""
    with psycopg.connect(owner_url(url), autocommit=True) as conn:
        conn.execute("ALTER TABLE public.ai_posts_embeddings OWNER TO sidecar;"
                     " GRANT CREATE ON SCHEMA public TO sidecar")


def test_what_the_role_hung_on_the_vectors_table_is_refused_before_it_changes_hands(
        planted: tuple[str, int]) -> None:
    """An index expression or a trigger the role put on ai_posts_embeddings while it owned it
    would run as the new owner (autovacuum's ANALYZE) or as the forum's role (its inserts)."""
    role, _ = planted
    _legacy(role)
    with psycopg.connect(role, autocommit=True) as conn:
        conn.execute("""
            CREATE INDEX planted_on_vectors ON public.ai_posts_embeddings
                ((sidecar.planted_int(post_id)));
            CREATE FUNCTION sidecar.planted_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN PERFORM sidecar.planted('trigger'); RETURN NEW; END $$;
            CREATE TRIGGER planted_trigger BEFORE INSERT ON public.ai_posts_embeddings
                FOR EACH ROW EXECUTE FUNCTION sidecar.planted_trigger()""")
    done = subprocess.run([*sidecar_command(), "db", "upgrade", "--as-owner", "--role",
                           SIDECAR_ROLE], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "DATABASE_URL": owner_url(role)})
    with psycopg.connect(owner_url(role), autocommit=True) as conn:
        conn.execute("ANALYZE public.ai_posts_embeddings")  # as autovacuum would, later
        owner = conn.execute("SELECT pg_get_userbyid(relowner) FROM pg_class"
                             " WHERE oid = 'public.ai_posts_embeddings'::regclass").fetchone()
    superuser, ran = _ran_as_owner(role)
    assert not superuser, ran
    assert ran == [], ran
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "planted_on_vectors" in done.stderr and "planted_trigger" in done.stderr, done.stderr
    assert owner == (SIDECAR_ROLE,)  # not handed over while it carries them
    with psycopg.connect(owner_url(role), autocommit=True) as conn:  # the operator removes them
        conn.execute("DROP INDEX public.planted_on_vectors;"
                     " DROP TRIGGER planted_trigger ON public.ai_posts_embeddings")
    again = subprocess.run([*sidecar_command(), "db", "upgrade", "--as-owner", "--role",
                            SIDECAR_ROLE], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "DATABASE_URL": owner_url(role)})
    assert again.returncode == 0, again.stderr
    assert _ran_as_owner(role) == (False, [])


def test_a_view_in_place_of_the_vectors_table_is_refused(planted: tuple[str, int]) -> None:
    """Where PUBLIC may create in the forum's schema (PostgreSQL 14 and older) and no
    ai_posts_embeddings is there yet, the role can make one: a view that runs its code."""
    role, _ = planted
    with psycopg.connect(owner_url(role), autocommit=True) as conn:
        conn.execute("DROP TABLE public.ai_posts_embeddings CASCADE;"
                     " GRANT CREATE ON SCHEMA public TO PUBLIC")
    with psycopg.connect(role, autocommit=True) as conn:
        conn.execute("""
            CREATE TABLE sidecar.fake_vectors (post_id bigint, model_id bigint,
                model_version int, strategy_id int, strategy_version int, digest text,
                embeddings public.halfvec, created_at timestamp, updated_at timestamp);
            INSERT INTO sidecar.fake_vectors VALUES (1, 100001, 1, 1, 1, 'd', '[1,2,3]',
                now(), now());
            CREATE VIEW public.ai_posts_embeddings AS SELECT * FROM sidecar.fake_vectors
                WHERE sidecar.planted('view in place of ai_posts_embeddings')""")
    done = subprocess.run([*sidecar_command(), "db", "upgrade", "--as-owner", "--role",
                           SIDECAR_ROLE], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "DATABASE_URL": owner_url(role)})
    assert _ran_as_owner(role) == (False, [])
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "public.ai_posts_embeddings" in done.stderr and "not a table" in done.stderr, \
        done.stderr
