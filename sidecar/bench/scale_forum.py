"""Writes a planned forum (:mod:`sidecar.bench.scale_plan`) into a scratch database.

The dump is first imported by the sidecar's own importer (so ``cooked`` and the search data are
what an import makes), its posts and topics set aside as the source, and the forum tables
emptied. The plan is loaded by binary ``COPY`` and the forum built from it with one
``INSERT … SELECT`` per table, in the columns Discourse has (``post_type``, ``hidden_at``,
``deleted_at``, ``user_deleted``, PM archetype with no category, …). ``post_search_data`` is
Discourse's ``title A || category B || tags C || body D``: the source's weighted vectors
concatenated, which is what ``to_tsvector`` of each part concatenated gives, without parsing
a million texts again.
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql

from sidecar.bench import scale_plan as sp
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE
from sidecar.ingest.importer import import_dump

COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
COPY_TRAILER = struct.pack(">h", -1)
POSTS_PER_USER = 20
SPAN_DAYS = 3650  # topics spread over ten years


@dataclass
class BuiltForum:
    """What was loaded, and how long each step took."""

    posts: int
    topics: int
    public_posts: int
    timings: dict[str, float] = field(default_factory=dict)


def copy_int_columns(conn: psycopg.Connection[Any], table: str,
                     columns: dict[str, npt.NDArray[np.int64]]) -> None:
    """Rows of int4 columns, by binary COPY built as one numpy record array."""
    names = list(columns)
    dtype = np.dtype([("fields", ">i2")] + [
        item for name in names for item in ((f"{name}_len", ">i4"), (name, ">i4"))])
    n = len(next(iter(columns.values())))
    rows = np.empty(n, dtype=dtype)
    rows["fields"] = len(names)
    for name in names:
        rows[f"{name}_len"] = 4
        rows[name] = columns[name]
    query = sql.SQL("COPY {} ({}) FROM STDIN (FORMAT BINARY)").format(
        sql.Identifier(table), sql.SQL(", ").join(map(sql.Identifier, names)))
    with conn.cursor().copy(query) as copy:
        copy.write(COPY_HEADER)
        for start in range(0, n, 200_000):
            copy.write(rows[start:start + 200_000].tobytes())
        copy.write(COPY_TRAILER)


def import_source(conn: psycopg.Connection[Any], dump: Path, ts_config: str
                  ) -> tuple[list[int], list[int]]:
    """Import the dump, keep its posts and topics as ``src_posts``/``src_topics``, empty the
    forum's post and topic tables (the categories stay). Run it in a transaction (the importer
    stages rows in tables dropped on commit) and commit.

    Returns (post ids, topic ids) of the dump's public posts, in (topic, post number) order.
    """
    import_dump(conn, dump, ts_config)
    public = source_posts(conn)
    conn.execute(
        """
        CREATE TABLE public.src_posts AS  -- the forum's schema: the importer searched ours first
        SELECT p.id, p.raw, p.cooked, p.word_count, p.like_count, d.raw_data,
               setweight(to_tsvector(%(cfg)s::regconfig, coalesce(d.raw_data, '')), 'D') AS tsv
        FROM posts p JOIN post_search_data d ON d.post_id = p.id
        """, {"cfg": ts_config})
    conn.execute(
        """
        CREATE TABLE public.src_topics AS
        SELECT id, title, fancy_title, slug, category_id,
               setweight(to_tsvector(%(cfg)s::regconfig, title), 'A') AS tsv FROM topics
        """, {"cfg": ts_config})
    conn.execute("ALTER TABLE src_posts ADD PRIMARY KEY (id)")
    conn.execute("ALTER TABLE src_topics ADD PRIMARY KEY (id)")
    conn.execute("TRUNCATE posts, topics, post_search_data, topic_tags, users,"
                 " sidecar_keyword_changes")
    return public


def source_posts(conn: psycopg.Connection[Any]) -> tuple[list[int], list[int]]:
    """(post ids, topic ids) of the dump's public posts, in (topic, post number) order."""
    rows = conn.execute(sql.SQL(
        "SELECT p.id, p.topic_id FROM posts p {joins} WHERE {public}"
        " ORDER BY p.topic_id, p.post_number").format(
        joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE))).fetchall()
    return [int(r[0]) for r in rows], [int(r[1]) for r in rows]


def _categories(conn: psycopg.Connection[Any]) -> dict[int, int]:
    """Add a read-restricted "Staff" category and a restricted "Private groups" parent with a
    twin of every source category below it; returns source category id -> its twin's id."""
    row = conn.execute("SELECT coalesce(max(id), 0) FROM categories").fetchone()
    top = int(row[0]) if row else 0
    sources = [int(r[0]) for r in conn.execute(
        "SELECT id FROM categories WHERE NOT read_restricted ORDER BY id").fetchall()]
    conn.execute(
        """
        INSERT INTO categories (id, name, name_lower, slug, read_restricted, created_at,
                                updated_at)
        VALUES (%(staff)s, 'Staff', 'staff', 'staff', true, now(), now()),
               (%(groups)s, 'Private groups', 'private groups', 'private-groups', true,
                now(), now())
        """, {"staff": top + 1, "groups": top + 2})
    twins = {src: top + 3 + i for i, src in enumerate(sources)}
    # Not restricted themselves: private because their parent is (the rule at any depth).
    conn.execute(
        """
        INSERT INTO categories (id, name, name_lower, slug, parent_category_id,
                                read_restricted, created_at, updated_at)
        SELECT t.twin, c.name, c.name_lower, c.slug || '-group', %(groups)s, false, now(), now()
        FROM unnest(%(src)s::int[], %(twin)s::int[]) AS t(src, twin)
        JOIN categories c ON c.id = t.src
        """, {"groups": top + 2, "src": list(twins), "twin": list(twins.values())})
    conn.execute("UPDATE categories SET topic_count = 0, post_count = 0")
    return twins | {-1: top + 1}


def _topic_categories(conn: psycopg.Connection[Any], plan: sp.ForumPlan,
                      src_category: dict[int, int], twins: dict[int, int]) -> npt.NDArray[Any]:
    own = np.array([src_category[int(t)] for t in plan.topic_src], dtype=np.int64)
    twin = np.array([twins.get(int(c), twins[-1]) for c in own], dtype=np.int64)
    kind = plan.topic_kind
    return np.where(kind == sp.PM, 0, np.where(kind == sp.STAFF, twins[-1],
                                               np.where(kind == sp.GROUP, twin, own)))


def write_forum(conn: psycopg.Connection[Any], plan: sp.ForumPlan, source: sp.Source,
                ts_config: str) -> BuiltForum:
    """Load the plan on an autocommit connection (VACUUM needs one); ``import_source`` must
    have run and committed on this database."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    src_category = {int(r[0]): int(r[1]) for r in conn.execute(
        "SELECT id, category_id FROM src_topics WHERE category_id IS NOT NULL").fetchall()}
    twins = _categories(conn)
    n_topics, n_posts = len(plan.topic_kind), plan.n_posts
    conn.execute("CREATE TEMP TABLE plan_topics (id int, src int, category int, kind int,"
                 " posts int)")
    copy_int_columns(conn, "plan_topics", {
        "id": np.arange(1, n_topics + 1), "src": plan.topic_src,
        "category": _topic_categories(conn, plan, src_category, twins),
        "kind": plan.topic_kind, "posts": plan.topic_posts})
    conn.execute("CREATE TEMP TABLE plan_posts (id int, topic int, number int, src int,"
                 " flag int, author int)")
    rng = np.random.default_rng(n_posts)
    n_users = max(1, n_posts // POSTS_PER_USER)
    copy_int_columns(conn, "plan_posts", {
        "id": np.arange(1, n_posts + 1), "topic": plan.post_topic, "number": plan.post_number,
        "src": source.post_ids[plan.post_src], "flag": plan.post_flag,
        "author": rng.integers(1, n_users + 1, n_posts)})
    conn.execute("ANALYZE plan_topics")
    conn.execute("ANALYZE plan_posts")
    timings["plan_copy_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    conn.execute(
        """
        INSERT INTO users (id, username, username_lower, created_at, updated_at)
        SELECT i, 'user' || i, 'user' || i, timestamp '2012-01-01', timestamp '2012-01-01'
        FROM generate_series(1, %s) AS i
        """, (n_users,))
    step = SPAN_DAYS * 86400.0 / max(n_topics, 1)
    conn.execute(
        sql.SQL(
            """
            INSERT INTO topics (id, title, fancy_title, slug, category_id, archetype, subtype,
                                visible, deleted_at, posts_count, reply_count,
                                highest_post_number, bumped_at, last_posted_at, created_at,
                                updated_at, user_id, visibility_reason_id)
            SELECT g.id, s.title, s.fancy_title, s.slug, nullif(g.category, 0),
                   CASE WHEN g.kind = {pm} THEN 'private_message' ELSE 'regular' END,
                   CASE WHEN g.kind = {pm} THEN 'user_to_user' END,
                   g.kind <> {unlisted},
                   CASE WHEN g.kind = {deleted} THEN c.at + interval '1 day' END,
                   g.posts, g.posts - 1, g.posts,
                   c.at + (g.posts - 1) * interval '2 hours',
                   c.at + (g.posts - 1) * interval '2 hours', c.at, c.at, 1 + g.id %% 1000,
                   CASE WHEN g.kind = {unlisted} THEN 1 END
            FROM plan_topics g JOIN src_topics s ON s.id = g.src
            CROSS JOIN LATERAL (SELECT timestamp '2012-01-01'
                                       + g.id * %(step)s * interval '1 second' AS at) c
            """).format(pm=sp.PM, unlisted=sp.UNLISTED, deleted=sp.DELETED_TOPIC),
        {"step": step})
    timings["topics_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    conn.execute(
        sql.SQL(
            """
            INSERT INTO posts (id, user_id, topic_id, post_number, raw, cooked, created_at,
                               updated_at, last_version_at, baked_at, baked_version,
                               deleted_at, like_count, post_type, hidden, hidden_reason_id,
                               hidden_at, user_deleted, word_count)
            SELECT g.id, g.author, g.topic, g.number, s.raw, s.cooked, a.at, a.at, a.at, a.at,
                   2, CASE WHEN g.flag = {deleted} THEN a.at + interval '1 hour' END,
                   s.like_count,
                   CASE g.flag WHEN {whisper} THEN 4 WHEN {small} THEN 3 ELSE 1 END,
                   g.flag = {hidden}, CASE WHEN g.flag = {hidden} THEN 1 END,
                   CASE WHEN g.flag = {hidden} THEN a.at + interval '1 hour' END,
                   g.flag = {user_deleted}, s.word_count
            FROM plan_posts g JOIN src_posts s ON s.id = g.src
            JOIN topics t ON t.id = g.topic
            CROSS JOIN LATERAL (SELECT t.created_at + (g.number - 1) * interval '2 hours'
                                AS at) a
            """).format(deleted=sp.DELETED, whisper=sp.WHISPER, small=sp.SMALL_ACTION,
                        hidden=sp.HIDDEN, user_deleted=sp.USER_DELETED))
    timings["posts_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    conn.execute(
        """
        INSERT INTO post_search_data (post_id, search_data, raw_data, locale, version)
        SELECT g.id, st.tsv || coalesce(ct.tsv, ''::tsvector) || sp.tsv, sp.raw_data,
               %(cfg)s, 1
        FROM plan_posts g JOIN src_posts sp ON sp.id = g.src
        JOIN plan_topics pt ON pt.id = g.topic
        JOIN src_topics st ON st.id = pt.src
        LEFT JOIN (SELECT id, setweight(to_tsvector(%(cfg)s::regconfig, name), 'B') AS tsv
                   FROM categories) ct ON ct.id = nullif(pt.category, 0)
        """, {"cfg": ts_config})
    timings["search_data_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    for table in ("users", "categories", "topics", "posts", "post_search_data"):
        conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(table)))
    timings["analyze_s"] = time.perf_counter() - t0
    return BuiltForum(posts=n_posts, topics=n_topics, public_posts=int(plan.public.sum()),
                      timings=timings)


def count_public(conn: psycopg.Connection[Any]) -> int:
    """Public posts by the sidecar's own rule (PUBLIC_WHERE)."""
    row = conn.execute(sql.SQL("SELECT count(*) FROM posts p {joins} WHERE {public}").format(
        joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE))).fetchone()
    return int(row[0]) if row else 0
