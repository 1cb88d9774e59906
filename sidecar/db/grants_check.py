"""``sidecar db check-grants``: the connected role's rights against :mod:`sidecar.db.grants`.

Missing: a Discourse column the sidecar reads and may not, a right on its own tables or on
``ai_posts_embeddings``, its own schema (:mod:`sidecar.db.schema`), pgvector. Excessive: anything
beyond, from a superuser to one more column of ``users``, to any write on a Discourse table, to
CREATE on a schema the forum uses (a function made there would run as the forum's own role) or
anything the role owns there. Only the catalogues and ``has_*_privilege`` are read: nothing is
tried.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psycopg
from psycopg.rows import dict_row

from sidecar.db.grants import (
    DISCOURSE_AI_MARKER,
    READS,
    SIDECAR_MODEL_IDS_FROM,
    VECTOR_TABLE,
    is_sidecar_table,
)
from sidecar.db.schema import FORUM_SCHEMA, SCHEMA

_VECTOR_WRITES = ("INSERT", "UPDATE", "DELETE")
# Role attributes no sidecar needs, each with what it would allow.
_ATTRIBUTES = {
    "rolsuper": "superuser: it may read and write every table of the forum, and bypass every "
                "check",
    "rolcreaterole": "CREATEROLE: it may create roles, and grant them rights",
    "rolcreatedb": "CREATEDB: it may create databases",
    "rolreplication": "REPLICATION: it may stream the whole database",
    "rolbypassrls": "BYPASSRLS: row-level security does not apply to it",
}
_TABLES = """
SELECT c.oid, n.nspname AS schema, c.relname AS name, c.relkind AS kind,
       pg_get_userbyid(c.relowner) AS owner,
       c.relowner = r.oid AS owned,
       pg_has_role(r.oid, c.relowner, 'USAGE') AS acts_as_owner,
       has_any_column_privilege(r.oid, c.oid, 'SELECT') AS reads_any,
       ARRAY(SELECT p FROM unnest(ARRAY['INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) AS p
             WHERE has_table_privilege(r.oid, c.oid, p)) AS writes,
       ARRAY(SELECT a.attname::text FROM pg_attribute a WHERE a.attrelid = c.oid
             AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum) AS columns,
       ARRAY(SELECT a.attname::text FROM pg_attribute a WHERE a.attrelid = c.oid
             AND a.attnum > 0 AND NOT a.attisdropped
             AND has_column_privilege(r.oid, c.oid, a.attnum, 'SELECT')
             ORDER BY a.attnum) AS readable
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_roles r ON r.rolname = current_user
WHERE n.nspname IN (%(forum)s, %(own)s) AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
ORDER BY n.nspname, c.relname
"""
# Every schema but the sidecar's and PostgreSQL's own: the forum's (public, and any other its
# plugins make). CREATE on one, the role's own or through PUBLIC, is too much.
_SCHEMAS = """
SELECT n.nspname AS name, has_schema_privilege(n.oid, 'CREATE') AS creates,
       EXISTS (SELECT FROM aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
               WHERE a.grantee = 0 AND a.privilege_type = 'CREATE') AS through_public,
       ARRAY(SELECT format('%%I.%%I(%%s)', n.nspname, p.proname,
                           pg_get_function_identity_arguments(p.oid))
             FROM pg_proc p WHERE p.pronamespace = n.oid
             AND pg_has_role(p.proowner, 'USAGE') ORDER BY 1) AS functions
FROM pg_namespace n
WHERE n.nspname <> %(own)s AND n.nspname NOT LIKE 'pg\\_%%' AND n.nspname <> 'information_schema'
ORDER BY n.nspname
"""


@dataclass
class GrantReport:
    """What the connected role lacks and what it has beyond its needs."""

    role: str
    missing: list[str] = field(default_factory=list)
    excessive: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """Nothing missing, nothing excessive."""
        return not self.missing and not self.excessive

    def as_dict(self) -> dict[str, Any]:
        """JSON form, for the command line."""
        return {"role": self.role, "ok": self.ok, "missing": self.missing,
                "excessive": self.excessive, "notes": self.notes}


def check_grants(conn: psycopg.Connection[Any]) -> GrantReport:
    """Compare the rights of ``conn``'s role with what the sidecar needs."""
    cur = conn.cursor(row_factory=dict_row)
    role = cur.execute(
        "SELECT r.*, pg_has_role(r.oid, 'pg_read_all_stats', 'USAGE') AS stats"
        " FROM pg_roles r WHERE r.rolname = current_user").fetchone()
    assert role is not None  # the connected role exists
    report = GrantReport(role=str(role["rolname"]))
    report.excessive += [what for attr, what in _ATTRIBUTES.items() if role[attr]]
    if role["stats"] and not role["rolsuper"]:
        report.notes.append("pg_read_all_stats (e.g. through pg_monitor): the backfill sees "
                            "every session's state and the replication lag; it also reads "
                            "other sessions' query texts")
    _schemas(report, cur, superuser=role["rolsuper"])
    rows = cur.execute(_TABLES, {"forum": FORUM_SCHEMA, "own": SCHEMA}).fetchall()
    tables = {row["name"]: row for row in rows if row["schema"] == FORUM_SCHEMA}
    discourse_ai = DISCOURSE_AI_MARKER in tables
    for row in rows:
        name = row["name"]
        if row["schema"] == SCHEMA:
            _own_table(report, row)
        elif is_sidecar_table(name):
            report.missing.append(f"{name} is still in the forum's schema {FORUM_SCHEMA}: "
                                  f"`sidecar db upgrade` moves it into the schema {SCHEMA}")
        elif name == VECTOR_TABLE:
            _vector_table(report, row, discourse_ai, role["rolsuper"])
        else:
            _forum_table(report, row, role["rolsuper"])
    for table, read in READS.items():
        if table not in tables and read.optional is None:
            report.notes.append(f"{table}: no such table here (not a Discourse database?)")
    if discourse_ai and READS[DISCOURSE_AI_MARKER].columns[0] in \
            tables[DISCOURSE_AI_MARKER]["readable"]:
        top = cur.execute(f"SELECT max(id) AS id FROM {DISCOURSE_AI_MARKER}").fetchone()
        if top and top["id"] is not None and top["id"] >= SIDECAR_MODEL_IDS_FROM:
            report.missing.append(
                f"discourse-ai's embedding definition ids reach {top['id']}: they would collide "
                f"with the sidecar's model ids (from {SIDECAR_MODEL_IDS_FROM}) in "
                f"{VECTOR_TABLE}")
    return report


def _schemas(report: GrantReport, cur: psycopg.Cursor[dict[str, Any]], *,
             superuser: bool) -> None:
    own = cur.execute(
        "SELECT coalesce(has_schema_privilege(to_regnamespace(%(own)s), 'USAGE')"
        " AND has_schema_privilege(to_regnamespace(%(own)s), 'CREATE'), false) AS own,"
        " has_schema_privilege(%(forum)s, 'USAGE') AS usage,"
        " (SELECT extversion FROM pg_extension WHERE extname = 'vector') AS vector",
        {"own": SCHEMA, "forum": FORUM_SCHEMA}).fetchone()
    assert own is not None
    if not own["own"]:
        report.missing.append(f"the schema {SCHEMA}, owned by the role: the sidecar's own tables "
                              "live there (the SQL of `sidecar db grants` makes it)")
    if not own["usage"]:
        report.missing.append(f"USAGE on schema {FORUM_SCHEMA}: the forum's tables are there")
    if own["vector"] is None:
        report.missing.append("the vector extension: CREATE EXTENSION vector, as a superuser "
                              "(the SQL of `sidecar db grants` does it)")
    if superuser:
        return  # it may create anywhere: reported already
    for schema in cur.execute(_SCHEMAS, {"own": SCHEMA}).fetchall():
        name = schema["name"]
        if schema["creates"]:
            how = (f" (through PUBLIC, as PostgreSQL 14 and older grant on {FORUM_SCHEMA}; run "
                   f"as a superuser: REVOKE CREATE ON SCHEMA {name} FROM PUBLIC, once the "
                   "forum's own role owns the schema, as Discourse's install makes it)"
                   if schema["through_public"] else "")
            report.excessive.append(
                f"CREATE on schema {name}, which the forum uses: a function made there would "
                f"run as the forum's own role{how}")
        if schema["functions"]:
            report.excessive.append(f"owns functions in the forum's schema {name}: "
                                    f"{', '.join(schema['functions'])}")


def _own_table(report: GrantReport, row: dict[str, Any]) -> None:
    if not row["acts_as_owner"]:
        report.missing.append(f"{row['name']} is owned by {row['owner']}: the sidecar's role "
                              "must own its tables (the SQL of `sidecar db grants` hands them "
                              "over)")


def _vector_table(report: GrantReport, row: dict[str, Any], discourse_ai: bool,
                  superuser: bool) -> None:
    whose = "discourse-ai's" if discourse_ai else "made for the sidecar"
    if superuser:
        return  # reported already
    if row["acts_as_owner"]:
        # Its owner could hang a trigger on it that the forum's role would run (discourse-ai
        # writes it), and may not index it without CREATE on the forum's schema anyway.
        report.excessive.append(f"acts as the owner of {VECTOR_TABLE} ({whose}, owned by "
                                f"{row['owner']}) in the forum's schema: the SQL of `sidecar "
                                "db grants` hands it to the owner, the role keeps its rows")
        return
    lacking = ([] if row["reads_any"] else ["SELECT"]) + [
        p for p in _VECTOR_WRITES if p not in row["writes"]]
    if lacking:
        report.missing.append(f"{', '.join(lacking)} on {VECTOR_TABLE} ({whose}, owned by "
                              f"{row['owner']})")
    report.notes.append(f"{VECTOR_TABLE} is {whose} (owned by {row['owner']}): the sidecar's "
                        "HNSW indexes on it are built by that owner (`sidecar db upgrade "
                        "--as-owner`, or the SQL of `sidecar db owner-sql`)")


def _forum_table(report: GrantReport, row: dict[str, Any], superuser: bool) -> None:
    name = row["name"]
    read = READS.get(name)
    wanted = [c for c in read.columns if c in row["columns"]] if read else []
    missing = [c for c in wanted if c not in row["readable"]]
    if missing:
        why = read.why if read else ""
        report.missing.append(f"SELECT ({', '.join(missing)}) on {name}: {why}")
    if superuser:
        return  # everything below is true of a superuser, already reported
    if row["acts_as_owner"]:
        report.excessive.append(f"acts as the owner of {name} ({row['owner']}): it may alter, "
                                "write or drop it")
        return
    if row["writes"]:
        report.excessive.append(f"{', '.join(row['writes'])} on {name}")
    extra = [c for c in row["readable"] if c not in wanted]
    if extra:
        shown = ", ".join(extra[:6]) + (f" and {len(extra) - 6} more" if len(extra) > 6 else "")
        report.excessive.append(f"SELECT on {name} beyond what the sidecar reads: {shown}")
