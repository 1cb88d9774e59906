"""Versioned, idempotent migrations (`sidecar db upgrade`).

Two tracks: ``forum`` creates Discourse-shaped tables and runs only in a database the sidecar owns;
``sidecar`` creates the sidecar's own tables and runs everywhere. Each file is applied once, in a
transaction, under an advisory lock so that several processes starting together do not race.
The sidecar's tables live in a schema of their own (:mod:`sidecar.db.schema`): the ``sidecar``
track runs with that schema first on the search path, the ``forum`` track with the forum's alone.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg

from sidecar.db.owner import vector_key_missing
from sidecar.db.schema import (
    FORUM_SCHEMA,
    SCHEMA,
    SEARCH_PATH,
    check_vector_table,
    ensure_schema,
    move_legacy_tables,
    with_search_path,
)
from sidecar.errors import ConfigurationError

log = logging.getLogger(__name__)

MIN_PGVECTOR = (0, 7, 0)  # halfvec arrived in pgvector 0.7
_LOCK_ID = 0x51DECA2  # arbitrary, constant: the advisory lock of our migrations
_VECTOR_VERSION = "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
_FILE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")
# The columns without which the sidecar cannot read a real forum; checked when it does not own
# the database (every column it reads, and may be granted, is in sidecar/db/grants.py).
REQUIRED_FORUM_COLUMNS: dict[str, tuple[str, ...]] = {
    "posts": ("id", "topic_id", "post_number", "raw", "cooked", "deleted_at", "hidden",
              "hidden_at", "post_type", "updated_at", "reply_to_post_number", "user_deleted"),
    "topics": ("id", "title", "slug", "category_id", "archetype", "visible", "deleted_at",
               "bumped_at"),
    "categories": ("id", "name", "read_restricted", "parent_category_id"),
    "tags": ("id", "name"),
    "topic_tags": ("topic_id", "tag_id"),
    "tag_group_memberships": ("tag_id", "tag_group_id"),
    "tag_group_permissions": ("tag_group_id", "group_id"),
    "post_search_data": ("post_id", "search_data"),
    "shared_drafts": ("topic_id",),
}


@dataclass(frozen=True)
class Migration:
    """One SQL file of a track."""

    track: str
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        """sha256 of the file, recorded to notice a file edited after it was applied."""
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations(track: str) -> list[Migration]:
    """The migrations of a track, in version order."""
    folder = resources.files("sidecar.db") / "migrations" / track
    found: list[Migration] = []
    for entry in folder.iterdir():
        match = _FILE.match(entry.name)
        if match:
            found.append(Migration(track, int(match[1]), match[2], entry.read_text("utf-8")))
    found.sort(key=lambda m: m.version)
    twice = sorted({f"{a.version:04d}" for a, b in itertools.pairwise(found)
                    if a.version == b.version})
    if twice:  # two branches that both added "the next" migration: renumber one of them
        raise ConfigurationError(f"migrations of {track} share a number: {', '.join(twice)}")
    return found


def parse_version(text: str) -> tuple[int, ...]:
    """'0.8.5' -> (0, 8, 5)."""
    return tuple(int(part) for part in re.findall(r"\d+", text)[:3])


def ensure_pgvector(conn: psycopg.Connection[Any]) -> str:
    """Create or check the vector extension; fail with a clear message if it is missing or old."""
    row = conn.execute(_VECTOR_VERSION).fetchone()
    if row is None:
        available = conn.execute(
            "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
        if available is None:
            raise ConfigurationError(
                "this PostgreSQL server has no pgvector extension; the sidecar needs pgvector "
                ">= 0.7 (halfvec). Install it (e.g. the postgresql-16-pgvector package) or unset "
                "DATABASE_URL to use the embedded PostgreSQL."
            )
        try:
            # In the forum's schema, where Discourse's images make it (never the sidecar's).
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        except psycopg.Error as exc:
            raise ConfigurationError(
                f"could not create the pgvector extension ({exc.diag.message_primary}); "
                "ask a superuser to run CREATE EXTENSION vector in this database (the SQL "
                "of `sidecar db grants` does it)."
            ) from exc
        row = conn.execute(_VECTOR_VERSION).fetchone()
    assert row is not None
    version = str(row[0] if not isinstance(row, dict) else row["extversion"])
    if parse_version(version) < MIN_PGVECTOR:
        raise ConfigurationError(
            f"pgvector {version} is too old: the sidecar needs >= 0.7 for halfvec. "
            "Run ALTER EXTENSION vector UPDATE as a superuser."
        )
    return version


def pgvector_version(conn: psycopg.Connection[Any]) -> str | None:
    """The installed pgvector's version, or None when the extension is not installed."""
    with conn.cursor() as cur:
        row = cur.execute(_VECTOR_VERSION).fetchone()
    if row is None:
        return None
    return str(row[0] if not isinstance(row, dict) else row["extversion"])


def _table_exists(conn: psycopg.Connection[Any], name: str, schema: str = SCHEMA) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.{name}",)).fetchone()
    return bool(row and row[0])


def _search(conn: psycopg.Connection[Any], path: str) -> None:
    # For the rest of the transaction: where the next migration's unqualified names go.
    conn.execute("SELECT set_config('search_path', %s, true)", (path,))


def forum_owned(conn: psycopg.Connection[Any]) -> bool:
    """True when the sidecar created (and may write) the forum tables of this database."""
    if not _table_exists(conn, "sidecar_meta"):
        return False
    row = conn.execute(f"SELECT value FROM {SCHEMA}.sidecar_meta"
                       " WHERE key = 'forum_owner'").fetchone()
    return bool(row and row[0] == "sidecar")


def check_forum_columns(conn: psycopg.Connection[Any]) -> None:
    """Fail clearly when a database we do not own lacks a table or column we read."""
    rows = conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = 'public' AND table_name = ANY(%s)",
        (list(REQUIRED_FORUM_COLUMNS),),
    ).fetchall()
    present = {(r[0], r[1]) for r in rows}
    missing = [f"{t}.{c}" for t, cols in REQUIRED_FORUM_COLUMNS.items() for c in cols
               if (t, c) not in present]
    if missing:
        raise ConfigurationError(
            "the forum database lacks columns the sidecar reads: " + ", ".join(missing)
        )


def check_current(url: str) -> None:
    """Fail clearly unless ``sidecar db upgrade`` has brought this database's schema up to date.

    What a process that must not migrate (a gunicorn worker) checks at start-up, before its
    pool opens (the pool's connections need the vector types).
    """
    with psycopg.connect(with_search_path(url), autocommit=True) as conn:
        if conn.execute(_VECTOR_VERSION).fetchone() is None \
                or not _table_exists(conn, "sidecar_schema_migrations"):
            raise ConfigurationError(
                "this database has no sidecar schema yet (or an older version's, in the forum's "
                "schema): run `sidecar db upgrade` first (the "
                "systemd unit runs it before gunicorn starts; `sidecar run` does it itself)")
        tracks = ["forum", "sidecar"] if forum_owned(conn) else ["sidecar"]
        done = {(r[0], r[1]) for r in conn.execute(
            "SELECT track, version FROM sidecar_schema_migrations").fetchall()}
    missing = [f"{track}/{m.version:04d}_{m.name}" for track in tracks
               for m in load_migrations(track) if (track, m.version) not in done]
    if missing:
        raise ConfigurationError(
            f"the database schema is behind this version of the sidecar (missing "
            f"{', '.join(missing)}): run `sidecar db upgrade`")


def upgrade(url: str) -> dict[str, object]:
    """Bring the database to the latest schema. Returns what was done, for the CLI to print."""
    applied: list[str] = []
    with psycopg.connect(with_search_path(url), autocommit=True) as conn:
        pgvector = ensure_pgvector(conn)
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK_ID,))
            ensure_schema(conn)
            moved = move_legacy_tables(conn)  # an older version's, from the forum's schema
            if moved:
                log.info("moved into the schema %s: %s", SCHEMA, ", ".join(moved))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS sidecar_schema_migrations ("
                " track text NOT NULL, version integer NOT NULL, name text NOT NULL,"
                " checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now(),"
                " PRIMARY KEY (track, version))"
            )
            conn.execute(
                "CREATE TABLE IF NOT EXISTS sidecar_meta"
                " (key text PRIMARY KEY, value text NOT NULL)"
            )
            if not _table_exists(conn, "posts", FORUM_SCHEMA):
                conn.execute(
                    "INSERT INTO sidecar_meta (key, value) VALUES ('forum_owner', 'sidecar') "
                    "ON CONFLICT (key) DO NOTHING"
                )
            owned = forum_owned(conn)
            tracks = ["forum", "sidecar"] if owned else ["sidecar"]
            if not owned:
                check_forum_columns(conn)
            check_vector_table(conn)
            done = {
                (r[0], r[1]) for r in conn.execute(
                    "SELECT track, version FROM sidecar_schema_migrations"
                ).fetchall()
            }
            for track in tracks:
                # Discourse's tables in the forum's schema; the sidecar's in its own.
                _search(conn, FORUM_SCHEMA if track == "forum" else SEARCH_PATH)
                for mig in load_migrations(track):
                    if (track, mig.version) in done:
                        continue
                    log.info("applying migration %s/%04d_%s", track, mig.version, mig.name)
                    conn.execute(mig.sql.encode())
                    conn.execute(  # qualified: the forum track searches the forum's schema
                        f"INSERT INTO {SCHEMA}.sidecar_schema_migrations"
                        " (track, version, name, checksum)"
                        " VALUES (%s, %s, %s, %s)",
                        (track, mig.version, mig.name, mig.checksum),
                    )
                    applied.append(f"{track}/{mig.version:04d}_{mig.name}")
            if vector_key_missing(conn):
                raise ConfigurationError(
                    "ai_posts_embeddings has no unique key on (model_id, strategy_id, post_id) "
                    "and the sidecar's role does not own it: its owner adds it (`sidecar db "
                    "upgrade --as-owner`, or `sidecar db owner-sql`)")
    return {"pgvector": pgvector, "forum_owned": owned, "applied": applied, "moved": moved}
