"""What the sidecar's database role may do on a live forum, as one map and the SQL that grants it.

The sidecar reads a few columns of Discourse's tables, owns its own tables (``sidecar_*``, in a
schema of their own: :mod:`sidecar.db.schema`), reads and writes its rows of
``ai_posts_embeddings``, and may create nothing in a schema of the forum. This
module is the one statement of that: :data:`FORUM_READS` names every Discourse table and column
a query of ``sidecar/db/`` reads, :func:`grant_statements` turns it into the SQL of
``sidecar db grants`` (column-level ``GRANT SELECT``), and :mod:`sidecar.db.grants_check` compares
a role's rights with it (``sidecar db check-grants``). The integration tests run as a role made
by that SQL, so a query that reads a column missing here fails the suite: PostgreSQL refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from sidecar.db.owner_trust import (
    CARRIES,
    NOT_A_TABLE,
    OWNER_SEARCH_PATH,
    TABLE_KINDS,
    check_role,
    pinned_search_path,
    planted_query,
)
from sidecar.db.schema import (
    FORUM_SCHEMA,
    SCHEMA,
    SEARCH_PATH,
    VECTOR_TABLE,
    VECTOR_TABLE_DDL,
)

# The sidecar's model ids start here (migration sidecar/0001): discourse-ai's
# embedding_definitions ids stay far below, so both share ai_posts_embeddings.
SIDECAR_MODEL_IDS_FROM = 100_001
DEFAULT_ROLE = "sidecar"
# discourse-ai's registry of models: where it exists, ai_posts_embeddings is discourse-ai's.
DISCOURSE_AI_MARKER = "embedding_definitions"
# The schemas (ours and PostgreSQL's aside) where PUBLIC, so the sidecar's role too, may create:
# PostgreSQL 14 and older grant it on public. Discourse's own role owns that schema (its install
# makes it so), so taking it back from PUBLIC leaves Discourse as it is.
PUBLIC_CREATE = (
    "SELECT n.nspname FROM pg_catalog.pg_namespace n"
    f" WHERE n.nspname <> '{SCHEMA}' AND n.nspname NOT LIKE 'pg\\_%'"
    " AND n.nspname <> 'information_schema' AND EXISTS (SELECT FROM pg_catalog.aclexplode("
    "coalesce(n.nspacl, pg_catalog.acldefault('n', n.nspowner))) a"
    " WHERE a.grantee OPERATOR(pg_catalog.=) 0::pg_catalog.oid AND a.privilege_type = 'CREATE')"
    " ORDER BY 1")
PUBLIC_CREATE_WARNING = (
    "PUBLIC may create in the schema %s (PostgreSQL 14 and older grant it on public), and so "
    "may the sidecar's role: a function it made there would run as the forum's own role. As a "
    "superuser, once the forum's own role owns the schema (Discourse's install makes it so: "
    "\\dn+ shows the owner), run: REVOKE CREATE ON SCHEMA %s FROM PUBLIC")


@dataclass(frozen=True)
class ForumRead:
    """A Discourse table and the columns the sidecar's queries read from it."""

    table: str
    columns: tuple[str, ...]
    why: str
    # Where the table may be absent (a plugin's, or one a minimal forum lacks): granted only
    # where it exists, and only its columns that exist.
    optional: str | None = None


FORUM_READS: tuple[ForumRead, ...] = (
    ForumRead("posts", (
        "id", "topic_id", "post_number", "user_id", "raw", "cooked", "post_type", "hidden",
        "hidden_at", "user_deleted", "deleted_at", "created_at", "updated_at",
        "reply_to_post_number", "like_count", "reply_count"),
        "the posts embedded and shown, the public filter, the links' features"),
    ForumRead("topics", (
        "id", "title", "slug", "category_id", "archetype", "visible", "closed", "archived",
        "deleted_at", "created_at", "updated_at", "bumped_at", "last_posted_at", "like_count"),
        "titles and links, the public filter, newest topics first, the rerank chain's boosts"),
    ForumRead("categories", (
        "id", "name", "parent_category_id", "read_restricted", "search_priority",
        "updated_at"),
        "read restrictions at any depth, the category in the embedded text"),
    ForumRead("shared_drafts", ("topic_id",),
              "the public filter: a shared draft is never public (whatever its category)"),
    ForumRead("tags", ("id", "name"), "tag names in the embedded text"),
    ForumRead("topic_tags", ("topic_id", "tag_id"), "the topic's tags"),
    ForumRead("tag_group_memberships", ("tag_id", "tag_group_id"),
              "staff-only tags are never embedded"),
    ForumRead("tag_group_permissions", ("tag_group_id", "group_id"),
              "staff-only tags are never embedded"),
    ForumRead("post_search_data", ("post_id", "search_data"),
              "the keyword index reads Discourse's own search documents"),
    ForumRead("users", ("id", "admin", "moderator"),
              "a reply by staff, for the linked post (no name, no e-mail)"),
    ForumRead("search_logs", ("term", "search_result_id", "search_result_type", "search_type",
                              "user_id", "crawler", "likely_crawler"),
              "`sidecar tune`, `sidecar train-reranker`: members' searches and clicks; user "
              "ids are only counted in SQL (distinct members), never read out",
              optional="Discourse's search log"),
    ForumRead("topic_custom_fields", ("id", "topic_id", "name", "value"),
              "accepted answers as older discourse-solved versions stored them",
              optional="discourse-solved before 2025"),
    ForumRead("discourse_solved_solved_topics", ("id", "topic_id", "answer_post_id"),
              "solved topics (discourse-solved); answer_post_id where a 2025 version keeps it",
              optional="discourse-solved"),
    ForumRead("discourse_solved_topic_answers", ("id", "solved_topic_id", "answer_post_id"),
              "accepted answers, several per topic (discourse-solved since 2026-04)",
              optional="discourse-solved since 2026-04"),
    ForumRead(DISCOURSE_AI_MARKER, ("id",),
              "`sidecar db check-grants`: discourse-ai's model ids stay below the sidecar's",
              optional="discourse-ai"),
)
READS: dict[str, ForumRead] = {read.table: read for read in FORUM_READS}


def is_sidecar_table(name: str) -> bool:
    """A table the sidecar creates and owns (``ai_posts_embeddings`` is decided apart)."""
    return name.startswith("sidecar_")


def _columns(read: ForumRead) -> str:
    return ", ".join(read.columns)


def _optional_grant(read: ForumRead, role: str) -> str:
    # Only the columns that exist: the table may be absent, or of an older shape.
    wanted = ", ".join(f"'{c}'" for c in read.columns)
    return (
        f"DO $$ DECLARE cols text; BEGIN\n"
        f"  SELECT string_agg(quote_ident(attname), ', ') INTO cols FROM pg_attribute\n"
        f"  WHERE attrelid = to_regclass('public.{read.table}') AND attnum > 0\n"
        f"    AND NOT attisdropped AND attname = ANY (ARRAY[{wanted}]);\n"
        f"  IF cols IS NOT NULL THEN\n"
        f"    EXECUTE format('GRANT SELECT (%s) ON public.{read.table} TO \"{role}\"', cols);\n"
        f"  END IF;\n"
        f"END $$"
    )


def grant_statements(role: str = DEFAULT_ROLE) -> list[tuple[str, str]]:
    """(comment, statement) pairs: the role and its rights, idempotent, to run as a superuser.

    Every statement runs in one transaction (no ``CONCURRENTLY`` here).
    """
    r = check_role(role)
    not_mine = f"OPERATOR(pg_catalog.<>) '{r}'::pg_catalog.regrole"
    steps: list[tuple[str, str]] = [
        ("first: this session searches PostgreSQL's catalogue only, nothing the role made",
         f"SET LOCAL search_path = {OWNER_SEARCH_PATH}"),
        ("the role: it logs in, and is nothing more",
         f"DO $$ BEGIN\n  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{r}') THEN\n"
         f"    CREATE ROLE \"{r}\" LOGIN;\n  END IF;\nEND $$"),
        ("", f'ALTER ROLE "{r}" LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION'
             " NOBYPASSRLS"),
        ("a safety net for any session of the role (the sidecar sets tighter limits itself)",
         f"ALTER ROLE \"{r}\" SET statement_timeout = '10min'"),
        ("", f"ALTER ROLE \"{r}\" SET lock_timeout = '30s'"),
        ("", f"ALTER ROLE \"{r}\" SET idle_in_transaction_session_timeout = '10min'"),
        ("pgvector >= 0.7 (bundled with Discourse's images), in the forum's schema",
         f"CREATE EXTENSION IF NOT EXISTS vector SCHEMA {FORUM_SCHEMA}"),
        ("connect; use the forum's schema, never create in it (a function made there would run"
         " as the forum's own role)",
         f"DO $$ BEGIN\n  EXECUTE format('GRANT CONNECT ON DATABASE %I TO \"{r}\"',"
         " current_database());\nEND $$"),
        ("", f'GRANT USAGE ON SCHEMA {FORUM_SCHEMA} TO "{r}"'),
        ("CREATE on any other schema, given earlier (as older versions did on public), is taken"
         " back",
         "DO $$ DECLARE s record; BEGIN\n"
         f"  FOR s IN SELECT nspname FROM pg_namespace WHERE nspname <> '{SCHEMA}'\n"
         "      AND nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema'\n"
         f"  LOOP\n    EXECUTE format('REVOKE CREATE ON SCHEMA %I FROM \"{r}\"', s.nspname);\n"
         "  END LOOP;\nEND $$"),
        ("the sidecar's own tables: a schema of their own, the role's",
         f'CREATE SCHEMA IF NOT EXISTS {SCHEMA} AUTHORIZATION "{r}"'),
        ("", f'ALTER SCHEMA {SCHEMA} OWNER TO "{r}"'),
        ("its sessions search its schema first (the sidecar sets it on its connections too);"
         " never the database's: the forum's role never searches the sidecar's schema",
         f"ALTER ROLE \"{r}\" SET search_path = {SEARCH_PATH.replace(',', ', ')}"),
        ("nothing of the forum but what follows: earlier grants on its tables are taken back",
         "DO $$ DECLARE t record; BEGIN\n"
         "  FOR t IN SELECT c.relname FROM pg_class c\n"
         "      JOIN pg_namespace n ON n.oid = c.relnamespace\n"
         "      WHERE n.nspname = 'public' AND c.relkind IN ('r', 'p', 'v', 'm', 'f', 'S')\n"
         f"        AND c.relname NOT LIKE 'sidecar\\_%' AND c.relowner {not_mine}\n"
         f"  LOOP\n    EXECUTE format('REVOKE ALL ON public.%I FROM \"{r}\"', t.relname);\n"
         "  END LOOP;\nEND $$"),
    ]
    for read in FORUM_READS:
        if read.optional is None:
            steps.append((f"{read.table}: {read.why}",
                          f'GRANT SELECT ({_columns(read)}) ON public.{read.table} TO "{r}"'))
        else:
            steps.append((f"{read.table} ({read.optional}, where it exists): {read.why}",
                          _optional_grant(read, r)))
    vector = f"{FORUM_SCHEMA}.{VECTOR_TABLE}"
    made = "".join(f"    {statement};\n" for statement in VECTOR_TABLE_DDL)
    steps += [
        (f"{VECTOR_TABLE}, in the forum's schema: discourse-ai's where it made it, else made"
         " here; never the role's (an owner could hang triggers on it, and indexing it needs"
         " CREATE on the schema: its owner builds its indexes, `sidecar db owner-sql`)",
         _vector_table(r, made)),
        ("the role reads and writes its own models' rows there",
         f'GRANT SELECT, INSERT, UPDATE, DELETE ON {vector} TO "{r}"'),
        ("the sidecar's own tables, made earlier under another role, become the role's (those"
         f" an older version left in {FORUM_SCHEMA} too: `sidecar db upgrade` moves them)",
         "DO $$ DECLARE t record; BEGIN\n"
         "  FOR t IN SELECT n.nspname, c.relname, c.relkind FROM pg_class c\n"
         "      JOIN pg_namespace n ON n.oid = c.relnamespace\n"
         f"      WHERE (n.nspname = '{SCHEMA}' OR (n.nspname = '{FORUM_SCHEMA}'"
         " AND c.relname LIKE 'sidecar\\_%'))\n"
         f"        AND c.relkind IN ('r', 'p', 'S') AND c.relowner {not_mine}\n"
         "        AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.classid = 'pg_class'::regclass\n"
         "                        AND d.objid = c.oid AND d.deptype IN ('a', 'i'))\n"
         "  LOOP\n"
         "    EXECUTE format('ALTER %s %I.%I OWNER TO \"" + r + "\"',\n"
         "                   CASE t.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,"
         " t.nspname, t.relname);\n"
         "  END LOOP;\nEND $$"),
        ("PostgreSQL 14 and older let PUBLIC create in the schema public: said, never changed"
         " here (the forum's own role may rely on it)",
         "DO $$ DECLARE s record; BEGIN\n"
         f"  FOR s IN {PUBLIC_CREATE}\n  LOOP\n"
         f"    RAISE WARNING '{_plpgsql(PUBLIC_CREATE_WARNING)}', s.nspname, s.nspname;\n"
         "  END LOOP;\nEND $$"),
    ]
    return steps


def _plpgsql(message: str) -> str:
    """A message of this module (``%s`` for each value) as a RAISE format in a literal."""
    return message.replace("'", "''").replace("%s", "%")


def _vector_table(r: str, made: str) -> str:
    # Made here where it is missing; refused where it is not a table or carries what the role
    # made (owner_trust.py says why); handed to the owner where an older version gave it to the
    # role, only then.
    vector = f"{FORUM_SCHEMA}.{VECTOR_TABLE}"
    where = f"c.oid OPERATOR(pg_catalog.=) to_regclass('{vector}')"
    return (
        "DO $$ DECLARE kind \"char\"; found text; BEGIN\n"
        f"  kind := (SELECT c.relkind FROM pg_class c WHERE {where});\n"
        f"  IF kind IS NULL THEN\n{made}"
        f"  ELSIF kind NOT IN ({', '.join(repr(k) for k in TABLE_KINDS)}) THEN\n"
        f"    RAISE EXCEPTION '{_plpgsql(NOT_A_TABLE)}', kind;\n"
        "  ELSE\n"
        "    SELECT string_agg(p.what || ' uses ' || p.uses, '; ') INTO found\n"
        f"      FROM ({planted_query(r)}) p;\n"
        "    IF found IS NOT NULL THEN\n"
        f"      RAISE EXCEPTION '{_plpgsql(CARRIES)}', '{r}', found;\n"
        "    END IF;\n"
        f"    IF (SELECT c.relowner FROM pg_class c WHERE {where})"
        f" OPERATOR(pg_catalog.=) '{r}'::pg_catalog.regrole THEN\n"
        f"      ALTER TABLE {vector} OWNER TO CURRENT_USER;\n"
        "    END IF;\n"
        "  END IF;\nEND $$")


def grants_script(role: str = DEFAULT_ROLE) -> str:
    """The SQL ``sidecar db grants`` prints: one transaction, for psql as a superuser."""
    r = check_role(role)
    lines = [
        f"-- forum-rag-sidecar: the least-privilege role \"{r}\" (`sidecar db grants`).",
        "-- Run it as a superuser (postgres) in the forum's database, e.g.",
        "--   psql -v ON_ERROR_STOP=1 -d discourse -f grants.sql",
        "-- It is idempotent: run it again after upgrading the sidecar. Then give the role a",
        f"-- password once: \\password {r}",
        "-- Optional: GRANT pg_monitor TO the role lets the backfill see every session's state",
        "-- and the replication lag (it also shows other sessions' query texts).",
        "BEGIN;",
    ]
    for comment, statement in grant_statements(r):
        if comment:
            lines.append(f"-- {comment}")
        lines.append(f"{statement};")
    lines.append("COMMIT;")
    return "\n".join(lines) + "\n"


def apply_grants(conn: psycopg.Connection[Any], role: str = DEFAULT_ROLE) -> None:
    """Run :func:`grant_statements` on ``conn`` (a superuser's), in one transaction, its
    search path pinned (:mod:`sidecar.db.owner_trust`) and put back after."""
    with conn.transaction(), pinned_search_path(conn):
        for _, statement in grant_statements(role):
            conn.execute(statement.encode())
