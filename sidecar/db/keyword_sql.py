"""SQL of the keyword index: the documents of public posts, and the change log every node tails.

The log (``sidecar_keyword_changes``) is appended under a table lock that only appenders take,
held until their transaction commits: ids therefore become visible in increasing order, and a
node that has applied every change up to id N only ever needs the rows after N. Readers never
take that lock.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg import sql
from psycopg.rows import dict_row, tuple_row

from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_TAG, PUBLIC_WHERE, category_subtree
from sidecar.errors import ConfigurationError

_PUBLIC = {"joins": sql.SQL(PUBLIC_JOINS), "public": sql.SQL(PUBLIC_WHERE)}
# A public post's keyword document: Discourse's search data, whose tag weight (C) holds every tag
# of the topic, staff-only ones included. For a topic with a tag anyone may not see
# (``PUBLIC_TAG``, the rule of the embedded text), the C weight is made again from its visible
# tags only, with the forum's text search configuration, as Discourse makes it; other posts keep
# their search data as it is.
_DOCUMENTS = sql.SQL(
    """
    SELECT d.post_id,
           CASE WHEN tg.hidden
                THEN (ts_filter(d.search_data, '{{a,b,d}}')
                      || setweight(to_tsvector(%(cfg)s::regconfig, coalesce(tg.names, '')), 'C')
                     )::text
                ELSE d.search_data::text END AS tsv
    FROM post_search_data d JOIN posts p ON p.id = d.post_id {joins}
    LEFT JOIN LATERAL (
        SELECT bool_or(NOT v.visible) AS hidden,
               string_agg(v.name, ' ' ORDER BY v.name) FILTER (WHERE v.visible) AS names
        FROM (SELECT g.name, {public_tag} AS visible FROM topic_tags tt
              JOIN tags g ON g.id = tt.tag_id WHERE tt.topic_id = p.topic_id) v
    ) tg ON true
    WHERE d.search_data IS NOT NULL AND {public}
    """
).format(public_tag=sql.SQL(PUBLIC_TAG), **_PUBLIC)
_LOCK = "LOCK TABLE sidecar_keyword_changes IN SHARE ROW EXCLUSIVE MODE"
WATERMARK_KEY = "keyword_watermark"  # sidecar_meta: changes before it are in the log
PRUNED_KEY = "keyword_changes_pruned_to"  # sidecar_meta: the highest log id pruned
# A watermark is set a little in the past: a forum transaction that set updated_at before it was
# read but committed after must still be caught next time (as sidecar/ingest/indexing.py
# CHECK_MARGIN).
CATCH_UP_MARGIN = timedelta(seconds=30)


def index_id(conn: DictConn) -> str:
    """The name of this database's keyword indexes on disk and of its related-topic cache in
    Redis (set by the migration): a UUID as PostgreSQL writes it, and nothing else (the role
    can write ``sidecar_meta``; a value such as ``../..`` would send the index elsewhere)."""
    row = conn.execute("SELECT value FROM sidecar_meta WHERE key = 'keyword_index_id'").fetchone()
    if row is None:
        raise RuntimeError("sidecar_meta has no keyword_index_id: run `sidecar db upgrade`")
    value = str(row["value"])
    try:
        canonical: str | None = str(uuid.UUID(value))
    except ValueError:
        canonical = None
    if canonical != value:
        raise ConfigurationError(
            f"sidecar_meta's keyword_index_id is not a UUID as the sidecar writes it: "
            f"{value[:80]!r}. It names the keyword index's folder: set it back (UPDATE "
            "sidecar.sidecar_meta SET value = gen_random_uuid()::text WHERE key = "
            "'keyword_index_id'; each node then builds its index again)")
    return value


def log_posts(conn: DictConn, post_ids: Sequence[int]) -> int:
    """Record that these posts' keyword documents may have changed. Keep the transaction short."""
    ids = sorted(set(post_ids))
    if not ids:
        return 0
    conn.execute(_LOCK)
    cur = conn.execute("INSERT INTO sidecar_keyword_changes (post_id) SELECT unnest(%s::bigint[])",
                       (ids,))
    return cur.rowcount


def log_scope(conn: DictConn, *, topic_ids: Sequence[int] = (),
              category_ids: Sequence[int] = ()) -> int:
    """Record every post of these topics, or of the topics of these categories (and their
    subcategories), public or not: a post that stopped being public must leave the indexes."""
    conn.execute(_LOCK)
    subtree = category_subtree("SELECT unnest(%(cats)s::int[])")
    cur = conn.execute(
        """
        INSERT INTO sidecar_keyword_changes (post_id)
        SELECT p.id FROM posts p JOIN topics t ON t.id = p.topic_id
        WHERE t.id = ANY(%(topics)s::int[]) OR t.category_id IN """ + subtree + """
        ORDER BY p.id
        """,
        {"topics": list(topic_ids), "cats": list(category_ids)},
    )
    return cur.rowcount


def log_rebuild(conn: DictConn) -> None:
    """Ask every node to rebuild its index (a NULL post id)."""
    conn.execute(_LOCK)
    conn.execute("INSERT INTO sidecar_keyword_changes (post_id) VALUES (NULL)")


def last_change(conn: DictConn) -> int:
    """The id of the latest logged change (0 when none)."""
    row = conn.execute("SELECT coalesce(max(id), 0) AS id FROM sidecar_keyword_changes"
                       ).fetchone()
    return int(row["id"]) if row else 0


def changes_after(conn: DictConn, after: int, limit: int) -> list[tuple[int, int | None]]:
    """(log id, post id or None) after ``after``, in id order."""
    rows = conn.execute(
        "SELECT id, post_id FROM sidecar_keyword_changes WHERE id > %s ORDER BY id LIMIT %s",
        (after, limit),
    ).fetchall()
    return [(int(r["id"]), None if r["post_id"] is None else int(r["post_id"])) for r in rows]


def pruned_to(conn: DictConn) -> int:
    """The highest log id already pruned: a node behind it must rebuild."""
    row = conn.execute("SELECT value FROM sidecar_meta WHERE key = %s", (PRUNED_KEY,)).fetchone()
    return int(row["value"]) if row else 0


def prune(conn: DictConn, keep: timedelta) -> int:
    """Delete log rows older than ``keep``; remember the highest id deleted."""
    row = conn.execute(
        "WITH gone AS (DELETE FROM sidecar_keyword_changes WHERE logged_at < now() - %s"
        " RETURNING id) SELECT count(*) AS n, max(id) AS top FROM gone", (keep,),
    ).fetchone()
    if not row or not row["n"]:
        return 0
    conn.execute(
        "INSERT INTO sidecar_meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE"
        " SET value = greatest(sidecar_meta.value::bigint, EXCLUDED.value::bigint)::text",
        (PRUNED_KEY, str(row["top"])),
    )
    return int(row["n"])


def utc_now(conn: psycopg.Connection[Any]) -> datetime:
    """The database's clock, in UTC without a time zone (as Discourse stores its timestamps)."""
    row = conn.cursor(row_factory=tuple_row).execute("SELECT now() AT TIME ZONE 'utc'").fetchone()
    assert row is not None
    return row[0]


def set_watermark_once(conn: psycopg.Connection[Any], when: datetime) -> None:
    """Start the catch-up from ``when`` unless it has started already."""
    conn.execute("INSERT INTO sidecar_meta (key, value) VALUES (%s, %s)"
                 " ON CONFLICT (key) DO NOTHING", (WATERMARK_KEY, when.isoformat()))


def catch_up(conn: psycopg.Connection[Any], margin: timedelta = CATCH_UP_MARGIN) -> int:
    """Log the posts whose post, topic or category (or parent category) row changed, or that
    were deleted, since the watermark, then move it to now less ``margin`` (a change committed
    late is seen next time).

    This is how a forum whose changes come without index events stays in sync, and how an
    import tells the nodes what it changed; it scans the posts table, so it runs with imports,
    the backfill and the nightly unit, never per request. Any connection (tuple or dict rows).
    """
    row = conn.cursor(row_factory=dict_row).execute(
        "SELECT value FROM sidecar_meta WHERE key = %s FOR UPDATE", (WATERMARK_KEY,)).fetchone()
    now = utc_now(conn)
    if row is None:  # no node has built an index yet: its build will cover everything
        set_watermark_once(conn, now - margin)
        return 0
    since = datetime.fromisoformat(str(row["value"]))
    conn.execute(_LOCK)
    cur = conn.execute(
        """
        INSERT INTO sidecar_keyword_changes (post_id)
        SELECT p.id FROM posts p JOIN topics t ON t.id = p.topic_id
        WHERE p.updated_at > %(since)s OR t.updated_at > %(since)s
              -- A category changed at any depth above the topic (e.g. made read-restricted).
              OR t.category_id IN """ + category_subtree(
            "SELECT id FROM categories WHERE updated_at > %(since)s") + """
              -- Discourse deletes with update_columns: deleted_at moves, updated_at does not.
              OR p.deleted_at > %(since)s OR t.deleted_at > %(since)s
        ORDER BY p.id
        """,
        {"since": since},
    )
    conn.execute("UPDATE sidecar_meta SET value = %s WHERE key = %s",
                 ((now - margin).isoformat(), WATERMARK_KEY))
    return cur.rowcount


def public_documents(conn: DictConn, post_ids: Sequence[int],
                     ts_config: str) -> list[tuple[int, str]]:
    """(post id, keyword document as tsvector text) of the public posts among ``post_ids``:
    their search data without the tags anyone may not see (``ts_config`` makes the visible
    tags' lexemes again where a hidden one is left out)."""
    rows = conn.execute(sql.SQL("{docs} AND d.post_id = ANY(%(ids)s)").format(docs=_DOCUMENTS),
                        {"ids": list(post_ids), "cfg": ts_config}).fetchall()
    return [(int(r["post_id"]), str(r["tsv"])) for r in rows]


def all_public_documents(conn: DictConn, ts_config: str,
                         batch: int = 5000) -> Iterator[tuple[int, str]]:
    """Every public post's (id, keyword document), as :func:`public_documents`, streamed by a
    server-side cursor.

    Run it in a REPEATABLE READ transaction to read one consistent snapshot.
    """
    with conn.cursor(name="sidecar_keyword_documents") as cur:
        cur.itersize = batch
        cur.execute(_DOCUMENTS, {"cfg": ts_config})
        for row in cur:
            yield int(row["post_id"]), str(row["tsv"])


def public_topics(conn: DictConn, post_ids: Sequence[int],
                  exclude_topics: Sequence[int] = ()) -> dict[int, int]:
    """post id -> topic id, for the posts among ``post_ids`` that are public now (and not in
    ``exclude_topics``)."""
    rows = conn.execute(
        sql.SQL("SELECT p.id, p.topic_id FROM posts p {joins} WHERE p.id = ANY(%s) AND {public}"
                " AND p.topic_id <> ALL(%s::int[])").format(**_PUBLIC),
        (list(post_ids), list(exclude_topics)),
    ).fetchall()
    return {int(r["id"]): int(r["topic_id"]) for r in rows}


def websearch_tsquery(conn: DictConn, ts_config: str, query: str) -> str:
    """``websearch_to_tsquery`` of ``query`` as text ('' when no word is searchable).

    Where PostgreSQL's parser gives up on the operators (its "tsquery stack too small" on deep
    negations), the words are read with ``plainto_tsquery`` instead: a question is never an
    error. Only a dash makes a negation, so only a question with one pays for the savepoint.
    """
    websearch = "SELECT websearch_to_tsquery(%s::regconfig, %s)::text AS q"
    if "-" not in query:
        row = conn.execute(websearch, (ts_config, query)).fetchone()
        return str(row["q"]) if row else ""
    try:
        with conn.transaction():  # a savepoint: the failed statement leaves the caller's open
            row = conn.execute(websearch, (ts_config, query)).fetchone()
    except (psycopg.errors.InternalError, psycopg.errors.ProgramLimitExceeded):
        row = conn.execute("SELECT plainto_tsquery(%s::regconfig, %s)::text AS q",
                           (ts_config, query)).fetchone()
    return str(row["q"]) if row else ""


def repeatable_read(conn: DictConn) -> None:
    """Make the connection's transaction (first statement) one snapshot: REPEATABLE READ."""
    conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
