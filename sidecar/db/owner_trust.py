"""What a session of the forum's owner (or a superuser) trusts when it works for the sidecar.

`sidecar db upgrade --as-owner`, and the SQL of `sidecar db grants` and `sidecar db owner-sql`
piped into psql, run as a role that may do anything in the forum's database. The sidecar's
least-privilege role owns the schema ``sidecar`` and may plant there what it likes: an operator
``=(oid, regrole)``, a ``quote_ident(name)``, a view named ``pg_class``... Any of them that the
owner's session finds by name runs with the owner's rights (the CVE-2018-1058 pattern, the other
way round). So such a session:

- searches PostgreSQL's own catalogue only (:data:`OWNER_SEARCH_PATH`), set by the sidecar
  itself at connection start and again as its first statement, whatever the URL, PGOPTIONS or
  the owner's role settings say: no schema the role can create in is ever searched;
- names everything else with its schema (the forum's table, pgvector's types, operator classes
  and functions), and compares a role's type through ``OPERATOR(pg_catalog.=)``;
- reads nothing from the role's schema: what it needs (which models have vectors, of how many
  dimensions) comes from the forum's own ``ai_posts_embeddings``, as integers checked before
  they shape a statement;
- refuses a ``public.ai_posts_embeddings`` that is not an ordinary table, or that carries an
  index, trigger, rule, policy, constraint or default using a function, operator, type or
  relation the role owns (:func:`vector_table_problems`): what an older version's role hung on it
  while it owned it would run as the new owner (autovacuum's ANALYZE evaluates index
  expressions as the table's owner) or as the forum's role (its inserts fire triggers).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg.rows import tuple_row

from sidecar.db.schema import FORUM_SCHEMA, VECTOR_TABLE
from sidecar.errors import ConfigurationError, InvalidInput

OWNER_SEARCH_PATH = "pg_catalog, pg_temp"  # pg_temp last: no temporary table stands in either
_OPTION = "-c search_path=pg_catalog,pg_temp"
_ROLE = re.compile(r"[a-z_][a-z0-9_]{0,62}")  # the whole name: fullmatch, never match
VECTOR_TABLE_QUALIFIED = f"{FORUM_SCHEMA}.{VECTOR_TABLE}"
TABLE_KINDS = ("r", "p")  # an ordinary or a partitioned table: nothing else is read
NOT_A_TABLE = (f"{VECTOR_TABLE_QUALIFIED} is not a table (relkind %s): the owner step reads and "
               "indexes only an ordinary table; a view or anything else there may run another "
               "role's code. Look at who made it (\\d+ in psql), drop it as a superuser, then "
               "run this again")
CARRIES = (f"{VECTOR_TABLE_QUALIFIED} carries objects that use what the role %s made, which "
           "would run as whoever writes or analyzes the table: %s. Drop them as a superuser "
           "(DROP INDEX / DROP TRIGGER / ...), then run this again")


def check_role(role: str) -> str:
    """The role name, when it is a plain lower-case identifier (it is pasted into SQL)."""
    if not _ROLE.fullmatch(role):
        raise InvalidInput(f"not a plain role name (lower-case letters, digits, _): {role!r}")
    return role


def planted_query(role: str) -> str:
    """``(what, uses)`` of each object on ``public.ai_posts_embeddings`` (the table itself, its
    indexes, triggers, rules, policies, constraints, defaults, statistics) that uses a function,
    operator, type or other relation ``role`` acts as the owner of. Plain SQL with the checked
    role inlined, for a DO block of the grants as for the owner's session."""
    r = check_role(role)
    table = f"pg_catalog.to_regclass('{VECTOR_TABLE_QUALIFIED}')::pg_catalog.oid"
    eq = "OPERATOR(pg_catalog.=)"

    def cls(name: str) -> str:
        return f"'pg_catalog.{name}'::pg_catalog.regclass::pg_catalog.oid"

    def owner(catalog: str, column: str) -> str:
        return (f" WHEN d.refclassid {eq} {cls(catalog)} THEN (SELECT p.{column}"
                f" FROM pg_catalog.{catalog} p WHERE p.oid {eq} d.refobjid")

    return (
        "SELECT pg_catalog.pg_describe_object(o.classid, o.objid, 0) AS what,"
        " pg_catalog.pg_describe_object(d.refclassid, d.refobjid, 0) AS uses"
        f" FROM (SELECT {cls('pg_class')} AS classid, {table} AS objid"
        # What belongs to the table (runs when it is written or analyzed), not what merely
        # reads it (another relation's view).
        " UNION SELECT h.classid, h.objid FROM pg_catalog.pg_depend h"
        f" WHERE h.refclassid {eq} {cls('pg_class')} AND h.refobjid {eq} {table}"
        f" AND h.deptype {eq} ANY ('{{a,i}}'::pg_catalog.\"char\"[])) o"
        f" JOIN pg_catalog.pg_depend d ON d.classid {eq} o.classid AND d.objid {eq} o.objid"
        f" WHERE pg_catalog.pg_has_role('{r}'::pg_catalog.name, CASE"
        f"{owner('pg_proc', 'proowner')})"
        f"{owner('pg_operator', 'oprowner')})"
        f"{owner('pg_type', 'typowner')})"
        f"{owner('pg_class', 'relowner')} AND p.oid OPERATOR(pg_catalog.<>) {table})"
        " END, 'USAGE')"
        " ORDER BY 1, 2"
    )


def owner_conninfo(url: str) -> str:
    """``url`` whose sessions search PostgreSQL's catalogue only (after any options in it, so
    that a URL's own search path never wins)."""
    given = str(conninfo_to_dict(url).get("options") or "")
    return make_conninfo(url, options=f"{given} {_OPTION}".strip())


def pin_search_path(conn: psycopg.Connection[Any]) -> None:
    """Search PostgreSQL's catalogue only, for the rest of ``conn``'s session (the function
    named with its schema: nothing is looked up by name before the path is pinned)."""
    row = conn.cursor(row_factory=tuple_row).execute(
        "SELECT pg_catalog.set_config('search_path', %s, false)",
        (OWNER_SEARCH_PATH,)).fetchone()
    if not row or row[0] != OWNER_SEARCH_PATH:
        raise ConfigurationError(f"could not pin the search path to {OWNER_SEARCH_PATH}")


@contextlib.contextmanager
def pinned_search_path(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """:func:`pin_search_path` for a block; the connection's own path is put back after it."""
    cur = conn.cursor(row_factory=tuple_row)
    row = cur.execute("SELECT pg_catalog.current_setting('search_path')").fetchone()
    before = str(row[0]) if row else ""
    pin_search_path(conn)
    try:
        yield
    finally:
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.INERROR:
            cur.execute("SELECT pg_catalog.set_config('search_path', %s, false)", (before,))


def vector_table_problems(conn: psycopg.Connection[Any], role: str) -> list[str]:
    """Why the owner's session may not touch ``public.ai_posts_embeddings`` (none: it may, or
    the table is not there). ``conn``'s search path must be pinned; ``role`` is the sidecar's.
    A superuser role (the sidecar owning its own database) has no one to be kept from."""
    cur = conn.cursor(row_factory=tuple_row)
    row = cur.execute("SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid"
                      " OPERATOR(pg_catalog.=) pg_catalog.to_regclass(%s)",
                      (VECTOR_TABLE_QUALIFIED,)).fetchone()
    if row is None:
        return []
    if str(row[0]) not in TABLE_KINDS:
        return [NOT_A_TABLE % row[0]]
    trusted = cur.execute("SELECT r.rolsuper FROM pg_catalog.pg_roles r"
                          " WHERE r.rolname OPERATOR(pg_catalog.=) %s::pg_catalog.name",
                          (check_role(role),)).fetchone()
    if trusted is None or trusted[0]:
        return []
    found = cur.execute(planted_query(role)).fetchall()
    if found:
        return [CARRIES % (role, "; ".join(f"{what} uses {uses}" for what, uses in found))]
    return []
