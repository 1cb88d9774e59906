"""Where the sidecar's tables live: a schema of their own, and the search path that finds them.

Beside a live forum the sidecar's role may create nothing in a schema the forum uses: a function
it made in ``public`` (say ``public.lower(varchar)``) would be run by Discourse's own role, which
searches ``public`` (the CVE-2018-1058 pattern), and a table it made could stand in the way of a
later Discourse migration. So its own tables (``sidecar_*``) live in the schema ``sidecar``,
which its role owns, and ``ai_posts_embeddings`` stays in ``public``, where discourse-ai keeps
it, made by whoever may create there (the SQL of ``sidecar db grants``, run as a superuser, or
the migration in a database the sidecar owns).

The sidecar's queries name its tables unqualified; every connection it opens searches
``sidecar`` first, then ``public`` (:data:`SEARCH_PATH`, set at connection start through libpq
``options``; the SQL of ``sidecar db grants`` sets it on the role as well, for a ``psql`` session
of the role). With its own schema first, nothing anyone makes in ``public`` can stand in for one
of its tables. The path is never set on the database: the forum's own role never searches the
sidecar's schema.

An install of a version that kept its tables in ``public`` has them moved, once, by
``sidecar db upgrade`` (:func:`move_legacy_tables`).
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import tuple_row

from sidecar.errors import ConfigurationError

SCHEMA = "sidecar"
# The forum's schema: its tables, pgvector's types, and discourse-ai's ai_posts_embeddings.
FORUM_SCHEMA = "public"
# pg_catalog is searched first all the same (it is not named), then ours, then the forum's.
SEARCH_PATH = f"{SCHEMA},{FORUM_SCHEMA}"
SEARCH_PATH_OPTION = f"-c search_path={SEARCH_PATH}"
VECTOR_TABLE = "ai_posts_embeddings"
UNIQUE_INDEX = "index_ai_posts_embeddings_on_model_strategy_post"
LOOKUP_INDEX = "sidecar_ai_posts_embeddings_post_model"
# ai_posts_embeddings as discourse-ai makes it, with its key and the backfill's lookup index,
# for whoever may create in the forum's schema (a superuser, the forum's owner) where
# discourse-ai has not made it: new and empty, so no CONCURRENTLY (and one transaction).
VECTOR_TABLE_DDL = (
    f"CREATE TABLE IF NOT EXISTS {FORUM_SCHEMA}.{VECTOR_TABLE} ("
    " post_id bigint NOT NULL, model_id bigint NOT NULL, model_version integer NOT NULL,"
    " strategy_id integer NOT NULL, strategy_version integer NOT NULL, digest text NOT NULL,"
    f" embeddings {FORUM_SCHEMA}.halfvec NOT NULL, created_at timestamp(6) NOT NULL,"
    " updated_at timestamp(6) NOT NULL)",
    # Each vector inside its row (migration sidecar/0005 says why).
    f"ALTER TABLE {FORUM_SCHEMA}.{VECTOR_TABLE} ALTER COLUMN embeddings SET STORAGE MAIN",
    f"CREATE UNIQUE INDEX IF NOT EXISTS {UNIQUE_INDEX} ON {FORUM_SCHEMA}.{VECTOR_TABLE}"
    " (model_id, strategy_id, post_id)",
    f"CREATE INDEX IF NOT EXISTS {LOOKUP_INDEX} ON {FORUM_SCHEMA}.{VECTOR_TABLE}"
    " (post_id, model_id)",
)
# The sidecar's tables and sequences left in the forum's schema by an older version; a sequence
# that belongs to a column (serial, identity) moves with its table.
_LEGACY = """
SELECT c.relname, c.relkind, pg_get_userbyid(c.relowner) AS owner,
       pg_has_role(c.relowner, 'USAGE') AS mine,
       to_regclass(format('%%I.%%I', %(schema)s::text, c.relname)) IS NOT NULL AS taken
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %(forum)s AND c.relname LIKE 'sidecar\\_%%' AND c.relkind IN ('r', 'p', 'S')
  AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                  AND d.objid = c.oid AND d.deptype IN ('a', 'i'))
ORDER BY c.relname
"""


def with_search_path(url: str) -> str:
    """``url`` whose sessions search the sidecar's schema first (options already in it kept)."""
    given = str(conninfo_to_dict(url).get("options") or "")
    return make_conninfo(url, options=f"{given} {SEARCH_PATH_OPTION}".strip())


def search_own_schema(conn: psycopg.Connection[Any]) -> None:
    """For the rest of ``conn``'s transaction, search the sidecar's schema first (for a caller
    handed a connection opened without :func:`with_search_path`)."""
    conn.execute("SELECT set_config('search_path', %s, true)", (SEARCH_PATH,))


def ensure_schema(conn: psycopg.Connection[Any]) -> None:
    """Create the sidecar's schema where the connected role may; fail clearly where it may not
    (beside a live forum the SQL of ``sidecar db grants`` makes it, owned by the role)."""
    cur = conn.cursor(row_factory=tuple_row)
    row = cur.execute(
        "SELECT to_regnamespace(%s) IS NOT NULL,"
        " has_database_privilege(current_database(), 'CREATE')", (SCHEMA,)).fetchone()
    assert row is not None
    exists, may_create = bool(row[0]), bool(row[1])
    if not exists:
        if not may_create:
            raise ConfigurationError(
                f"the schema {SCHEMA} does not exist and this role may not create it: run the "
                "SQL of `sidecar db grants` as a superuser (it creates the schema, owned by the "
                "sidecar's role), then `sidecar db upgrade` again")
        cur.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(SCHEMA)))
        return
    row = cur.execute("SELECT has_schema_privilege(%s, 'USAGE')"
                      " AND has_schema_privilege(%s, 'CREATE')", (SCHEMA, SCHEMA)).fetchone()
    if not (row and row[0]):
        raise ConfigurationError(
            f"this role may not create tables in the schema {SCHEMA}: run the SQL of `sidecar "
            "db grants` as a superuser (it makes the sidecar's role the schema's owner)")


def move_legacy_tables(conn: psycopg.Connection[Any]) -> list[str]:
    """Move the sidecar's tables and sequences that an older version made in ``public`` into
    its schema (their rows, indexes and rights go with them). Returns what moved.

    The connected role must own them (the SQL of ``sidecar db grants`` hands them to the
    sidecar's role). Run under the migrations' lock, before they look for their records.
    """
    cur = conn.cursor(row_factory=tuple_row)
    rows = cur.execute(_LEGACY, {"schema": SCHEMA, "forum": FORUM_SCHEMA}).fetchall()
    foreign = [f"{name} (owned by {owner})" for name, _, owner, mine, _ in rows if not mine]
    if foreign:
        raise ConfigurationError(
            f"the sidecar's tables in {FORUM_SCHEMA} must move to the schema {SCHEMA} and this "
            f"role does not own {', '.join(foreign)}: run the SQL of `sidecar db grants` as a "
            "superuser (it hands them to the sidecar's role), then `sidecar db upgrade` again")
    twice = [name for name, _, _, _, taken in rows if taken]
    if twice:
        raise ConfigurationError(
            f"{', '.join(twice)} exist both in {FORUM_SCHEMA} and in {SCHEMA}: a newer sidecar "
            f"made its tables while an older one still kept its own in {FORUM_SCHEMA}; keep "
            "one copy of each (docs/deployment.md, \"Its own schema\")")
    moved = []
    for name, kind, *_ in rows:
        what = sql.SQL("SEQUENCE" if kind == "S" else "TABLE")
        cur.execute(sql.SQL("ALTER {} {}.{} SET SCHEMA {}").format(
            what, sql.Identifier(FORUM_SCHEMA), sql.Identifier(name), sql.Identifier(SCHEMA)))
        moved.append(name)
    return moved


def check_vector_table(conn: psycopg.Connection[Any]) -> None:
    """Fail clearly when ``ai_posts_embeddings`` is missing and this role may not create it in
    the forum's schema (the SQL of ``sidecar db grants`` makes it there)."""
    row = conn.cursor(row_factory=tuple_row).execute(
        "SELECT to_regclass(%s) IS NULL AND NOT has_schema_privilege(%s, 'CREATE')",
        (f"{FORUM_SCHEMA}.{VECTOR_TABLE}", FORUM_SCHEMA)).fetchone()
    if row and row[0]:
        raise ConfigurationError(
            f"{FORUM_SCHEMA}.{VECTOR_TABLE} does not exist and the sidecar's role may not "
            f"create anything in {FORUM_SCHEMA}: run the SQL of `sidecar db grants` as a "
            "superuser (it creates the table), then `sidecar db upgrade` again")
