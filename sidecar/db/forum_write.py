"""Writes into the Discourse-shaped forum tables of a database the sidecar owns (import only).

Rows go through COPY into temporary staging tables, then one upsert per table. The upsert only
touches a row whose content changed (``IS DISTINCT FROM``), so re-importing the same dump is a
no-op and ``updated_at`` moves only for real edits, which is what drift detection relies on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import psycopg
from psycopg import sql

from sidecar.dump_format import CategoryRow, PostRow, TopicRow


def _inserted_updated(rows: Sequence[tuple[bool]]) -> tuple[int, int]:
    inserted = sum(1 for r in rows if r[0])
    return inserted, len(rows) - inserted


def upsert_categories(
    conn: psycopg.Connection[Any], cats: Sequence[CategoryRow]
) -> tuple[int, int]:
    """Insert or update categories; returns (inserted, updated)."""
    conn.execute(
        "CREATE TEMP TABLE stage_categories (id int, name text, slug text, description text,"
        " parent_category_id int, read_restricted bool, search_priority int) ON COMMIT DROP"
    )
    with conn.cursor().copy(
        "COPY stage_categories (id, name, slug, description, parent_category_id, read_restricted,"
        " search_priority) FROM STDIN"
    ) as copy:
        for c in cats:
            copy.write_row((c.id, c.name, c.slug, c.description, c.parent_category_id,
                            c.read_restricted, c.search_priority))
    rows = conn.execute(
        """
        INSERT INTO categories AS c (id, name, name_lower, slug, description, parent_category_id,
                                     read_restricted, search_priority, created_at, updated_at)
        SELECT id, name, lower(name), slug, description, parent_category_id, read_restricted,
               search_priority, now() AT TIME ZONE 'utc', now() AT TIME ZONE 'utc'
        FROM stage_categories
        ON CONFLICT (id) DO UPDATE SET
            name = EXCLUDED.name, name_lower = EXCLUDED.name_lower, slug = EXCLUDED.slug,
            description = EXCLUDED.description, parent_category_id = EXCLUDED.parent_category_id,
            read_restricted = EXCLUDED.read_restricted,
            search_priority = EXCLUDED.search_priority, updated_at = EXCLUDED.updated_at
        WHERE (c.name, c.slug, c.description, c.parent_category_id, c.read_restricted,
               c.search_priority)
              IS DISTINCT FROM (EXCLUDED.name, EXCLUDED.slug, EXCLUDED.description,
                                EXCLUDED.parent_category_id, EXCLUDED.read_restricted,
                                EXCLUDED.search_priority)
        RETURNING (xmax = 0)
        """
    ).fetchall()
    return _inserted_updated(rows)


def upsert_topics(conn: psycopg.Connection[Any], topics: Sequence[TopicRow]) -> tuple[int, int]:
    """Insert or update topics and their tags; returns (inserted, updated)."""
    conn.execute(
        "CREATE TEMP TABLE stage_topics (id int, title text, slug text, category_id int,"
        " archetype text, visible bool, closed bool, archived bool, deleted_at timestamp,"
        " created_at timestamp, posts_count int, external_id text, tags text[]) ON COMMIT DROP"
    )
    with conn.cursor().copy(
        "COPY stage_topics (id, title, slug, category_id, archetype, visible, closed, archived,"
        " deleted_at, created_at, posts_count, external_id, tags) FROM STDIN"
    ) as copy:
        for t in topics:
            copy.write_row((t.id, t.title, t.effective_slug, t.category_id, t.archetype,
                            t.visible, t.closed, t.archived, t.deleted_at, t.created_at,
                            t.posts_count, t.external_id, sorted({x.lower() for x in t.tags})))
    rows = conn.execute(
        """
        INSERT INTO topics AS t (id, title, fancy_title, slug, category_id, archetype, visible,
                                 closed, archived, deleted_at, posts_count, bumped_at, created_at,
                                 updated_at, external_id)
        SELECT id, title, title, slug, category_id, archetype, visible, closed, archived,
               deleted_at, posts_count, created_at, created_at, created_at, external_id
        FROM stage_topics
        ON CONFLICT (id) DO UPDATE SET
            title = EXCLUDED.title, fancy_title = EXCLUDED.fancy_title, slug = EXCLUDED.slug,
            category_id = EXCLUDED.category_id, archetype = EXCLUDED.archetype,
            visible = EXCLUDED.visible, closed = EXCLUDED.closed, archived = EXCLUDED.archived,
            deleted_at = EXCLUDED.deleted_at, posts_count = EXCLUDED.posts_count,
            external_id = EXCLUDED.external_id,
            updated_at = greatest(t.updated_at, now() AT TIME ZONE 'utc')
        WHERE (t.title, t.slug, t.category_id, t.archetype, t.visible, t.closed, t.archived,
               t.deleted_at, t.posts_count)
              IS DISTINCT FROM (EXCLUDED.title, EXCLUDED.slug, EXCLUDED.category_id,
                                EXCLUDED.archetype, EXCLUDED.visible, EXCLUDED.closed,
                                EXCLUDED.archived, EXCLUDED.deleted_at, EXCLUDED.posts_count)
        RETURNING (xmax = 0)
        """
    ).fetchall()
    conn.execute(
        """
        INSERT INTO tags (name, created_at, updated_at)
        SELECT DISTINCT unnest(tags), now() AT TIME ZONE 'utc', now() AT TIME ZONE 'utc'
        FROM stage_topics
        ON CONFLICT (lower(name)) DO NOTHING
        """
    )
    conn.execute(
        """
        DELETE FROM topic_tags tt USING stage_topics s, tags g
        WHERE tt.topic_id = s.id AND g.id = tt.tag_id AND NOT (lower(g.name) = ANY(s.tags))
        """
    )
    conn.execute(
        """
        INSERT INTO topic_tags (topic_id, tag_id, created_at, updated_at)
        SELECT s.id, g.id, now() AT TIME ZONE 'utc', now() AT TIME ZONE 'utc'
        FROM stage_topics s CROSS JOIN LATERAL unnest(s.tags) AS n(name)
        JOIN tags g ON lower(g.name) = n.name
        ON CONFLICT (topic_id, tag_id) DO NOTHING
        """
    )
    conn.execute(
        """
        UPDATE tags g SET topic_count = sub.n, public_topic_count = sub.n
        FROM (SELECT tag_id, count(*) AS n FROM topic_tags GROUP BY tag_id) sub
        WHERE sub.tag_id = g.id AND g.topic_count IS DISTINCT FROM sub.n
        """
    )
    return _inserted_updated(rows)


def post_number_clashes(
    conn: psycopg.Connection[Any], posts: Iterable[tuple[int, PostRow]]
) -> list[tuple[int, str]]:
    """Rows whose (topic_id, post_number) is already taken by another post id in the database."""
    pairs = [(line, p.id, p.topic_id, p.post_number) for line, p in posts]
    if not pairs:
        return []
    rows = conn.execute(
        """
        SELECT s.line, p.id FROM unnest(%s::int[], %s::int[], %s::int[], %s::int[])
             AS s(line, id, topic_id, post_number)
        JOIN posts p ON p.topic_id = s.topic_id AND p.post_number = s.post_number AND p.id <> s.id
        """,
        ([x[0] for x in pairs], [x[1] for x in pairs], [x[2] for x in pairs],
         [x[3] for x in pairs]),
    ).fetchall()
    return [(r[0], f"post_number already used by post {r[1]} in that topic") for r in rows]


def upsert_posts(
    conn: psycopg.Connection[Any], posts: Sequence[PostRow], cooked: Sequence[str]
) -> tuple[int, int]:
    """Insert or update posts; an edited post gets a new ``updated_at``. Returns counts."""
    conn.execute(
        "CREATE TEMP TABLE stage_posts (id int, topic_id int, post_number int, user_id int,"
        " raw text, cooked text, created_at timestamp, updated_at timestamp,"
        " reply_to_post_number int, post_type int, hidden bool, deleted_at timestamp,"
        " external_id text, like_count int) ON COMMIT DROP"
    )
    with conn.cursor().copy(
        "COPY stage_posts (id, topic_id, post_number, user_id, raw, cooked, created_at,"
        " updated_at, reply_to_post_number, post_type, hidden, deleted_at, external_id,"
        " like_count) FROM STDIN"
    ) as copy:
        for p, html in zip(posts, cooked, strict=True):
            copy.write_row((p.id, p.topic_id, p.post_number, p.user_id, p.raw, html,
                            p.created_at, p.updated_at or p.created_at, p.reply_to_post_number,
                            p.post_type, p.hidden, p.deleted_at, p.external_id, p.like_count))
    rows = conn.execute(
        """
        INSERT INTO posts AS p (id, topic_id, post_number, user_id, raw, cooked, created_at,
                                updated_at, last_version_at, reply_to_post_number, post_type,
                                hidden, hidden_at, deleted_at, word_count, external_id)
        SELECT id, topic_id, post_number, user_id, raw, cooked, created_at, updated_at,
               updated_at, reply_to_post_number, post_type, hidden,
               CASE WHEN hidden THEN updated_at END, deleted_at,
               array_length(regexp_split_to_array(trim(raw), '\\s+'), 1), external_id
        FROM stage_posts
        ON CONFLICT (id) DO UPDATE SET
            topic_id = EXCLUDED.topic_id, post_number = EXCLUDED.post_number,
            user_id = EXCLUDED.user_id, raw = EXCLUDED.raw, cooked = EXCLUDED.cooked,
            reply_to_post_number = EXCLUDED.reply_to_post_number,
            post_type = EXCLUDED.post_type, hidden = EXCLUDED.hidden,
            hidden_at = EXCLUDED.hidden_at, deleted_at = EXCLUDED.deleted_at,
            word_count = EXCLUDED.word_count, external_id = EXCLUDED.external_id,
            updated_at = greatest(EXCLUDED.updated_at, now() AT TIME ZONE 'utc'),
            version = p.version + (p.raw IS DISTINCT FROM EXCLUDED.raw)::int
        WHERE (p.topic_id, p.post_number, p.raw, p.reply_to_post_number, p.post_type, p.hidden,
               p.deleted_at)
              IS DISTINCT FROM (EXCLUDED.topic_id, EXCLUDED.post_number, EXCLUDED.raw,
                                EXCLUDED.reply_to_post_number, EXCLUDED.post_type,
                                EXCLUDED.hidden, EXCLUDED.deleted_at)
        RETURNING (xmax = 0)
        """
    ).fetchall()
    # Likes are counters, not edits: as in Discourse, a like does not move updated_at (which
    # drift detection reads), so they are set apart from the content upsert.
    conn.execute(
        """
        UPDATE posts p SET like_count = s.like_count FROM stage_posts s
        WHERE p.id = s.id AND p.like_count IS DISTINCT FROM s.like_count
        """
    )
    return _inserted_updated(rows)


def upsert_users(conn: psycopg.Connection[Any], posts: Sequence[PostRow]) -> None:
    """Create the authors named by posts (id and username), keeping usernames unique."""
    users: dict[int, str] = {}
    for p in posts:
        if p.user_id is not None and p.user_id > 0:
            users.setdefault(p.user_id, p.username or f"user{p.user_id}")
    if not users:
        return
    conn.execute(
        """
        INSERT INTO users (id, username, username_lower, created_at, updated_at)
        SELECT u.id, u.name, lower(u.name), now() AT TIME ZONE 'utc', now() AT TIME ZONE 'utc'
        FROM unnest(%s::int[], %s::text[]) AS u(id, name)
        WHERE NOT EXISTS (SELECT 1 FROM users x WHERE x.username_lower = lower(u.name)
                          AND x.id <> u.id)
        ON CONFLICT (id) DO NOTHING
        """,
        (list(users), list(users.values())),
    )


def refresh_topic_stats(conn: psycopg.Connection[Any], topic_ids: set[int]) -> None:
    """Recompute the denormalized counters Discourse keeps on topics and categories."""
    if not topic_ids:
        return
    conn.execute(
        """
        UPDATE topics t SET highest_post_number = s.hi, bumped_at = s.last,
               last_posted_at = s.last, reply_count = s.replies, like_count = s.likes
        FROM (SELECT topic_id, max(post_number) AS hi, max(created_at) AS last,
                     count(*) FILTER (WHERE post_number > 1 AND deleted_at IS NULL) AS replies,
                     coalesce(sum(like_count) FILTER (WHERE deleted_at IS NULL), 0) AS likes
              FROM posts WHERE topic_id = ANY(%s) GROUP BY topic_id) s
        WHERE t.id = s.topic_id
              AND (t.highest_post_number, t.bumped_at, t.reply_count, t.like_count)
              IS DISTINCT FROM (s.hi, s.last, s.replies, s.likes)
        """,
        (list(topic_ids),),
    )
    conn.execute(
        """
        UPDATE categories c SET topic_count = s.topics, post_count = s.posts
        FROM (SELECT t.category_id, count(DISTINCT t.id) AS topics, count(p.id) AS posts
              FROM topics t LEFT JOIN posts p ON p.topic_id = t.id
              WHERE t.deleted_at IS NULL GROUP BY t.category_id) s
        WHERE c.id = s.category_id AND (c.topic_count, c.post_count)
              IS DISTINCT FROM (s.topics, s.posts)
        """
    )


def replace_search_data(
    conn: psycopg.Connection[Any],
    posts: Sequence[PostRow],
    texts: Sequence[str],
    ts_config: str,
    touched_topics: set[int],
) -> None:
    """Fill ``post_search_data`` as Discourse does: title A, category B, tags C, body D.

    Posts of a topic whose title, category or tags may have changed are re-indexed too, because
    every post's search data carries its topic's title.
    """
    conn.execute(
        """
        INSERT INTO post_search_data AS d (post_id, raw_data, locale, version)
        SELECT id, txt, %s, 0 FROM unnest(%s::int[], %s::text[]) AS u(id, txt)
        ON CONFLICT (post_id) DO UPDATE SET raw_data = EXCLUDED.raw_data, version = 0
        WHERE d.raw_data IS DISTINCT FROM EXCLUDED.raw_data
        """,
        (ts_config, [p.id for p in posts], list(texts)),
    )
    conn.execute(
        """
        UPDATE post_search_data d SET version = 0
        FROM posts p WHERE p.id = d.post_id AND p.topic_id = ANY(%s)
        """,
        (list(touched_topics),),
    )
    reindex_search_data(conn, ts_config)


def reindex_search_data(conn: psycopg.Connection[Any], ts_config: str) -> int:
    """Recompute ``search_data`` for every row marked stale (version 0). Returns the count."""
    cur = conn.execute(
        """
        UPDATE post_search_data d SET
            search_data =
                setweight(to_tsvector(%(cfg)s::regconfig, coalesce(t.title, '')), 'A')
                || setweight(to_tsvector(%(cfg)s::regconfig, coalesce(c.name, '')), 'B')
                || setweight(to_tsvector(%(cfg)s::regconfig, coalesce(tg.names, '')), 'C')
                || setweight(to_tsvector(%(cfg)s::regconfig, coalesce(d.raw_data, '')), 'D'),
            locale = %(cfg)s,
            version = 1
        FROM posts p
        JOIN topics t ON t.id = p.topic_id
        LEFT JOIN categories c ON c.id = t.category_id
        LEFT JOIN LATERAL (SELECT string_agg(g.name, ' ') AS names FROM topic_tags tt
                           JOIN tags g ON g.id = tt.tag_id WHERE tt.topic_id = t.id) tg ON true
        WHERE d.post_id = p.id AND d.version = 0
        """,
        {"cfg": ts_config},
    )
    return cur.rowcount


# The tables an import writes: their statistics are refreshed after it.
IMPORTED_TABLES = ("categories", "topics", "posts", "tags", "topic_tags", "post_search_data",
                   "discourse_solved_solved_topics", "discourse_solved_topic_answers")


def analyze_imported(conn: psycopg.Connection[Any]) -> None:
    """Fresh statistics of the imported tables, or the planner guesses one row per table and
    scans posts in a loop."""
    for table in IMPORTED_TABLES:
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))
