"""Beside a real forum: the sidecar reads Discourse's tables, embeds, searches, never alters them.

The forum here is made the way Discourse makes it, not by `sidecar import`: its tables exist
before the sidecar arrives (no ownership marker), posts carry Discourse's cooked HTML (quotes as
`aside.quote`), and `post_search_data` is filled by "Discourse" (weights A title, B category,
D body). The sidecar must treat the database as someone else's.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import psycopg
import pytest

from sidecar.core.types import Mode
from sidecar.db.migrate import forum_owned, upgrade
from sidecar.errors import ConfigurationError
from sidecar.ingest.importer import import_dump
from sidecar.runtime.bootstrap import backfill_sync
from sidecar.runtime.resources import start_resources
from sidecar.search.service import SearchOptions
from tests.conftest import make_settings
from tests.helpers import category, post, topic, write_dump

COOKED_QUOTE = (
    '<aside class="quote no-group" data-username="bob" data-post="1" data-topic="1">'
    '<div class="title"><img src="/avatar.png"> bob:</div><blockquote><p>Which sealant for '
    'tubeless tyres?</p></blockquote></aside><p>I use <strong>60 ml</strong> of latex sealant '
    'per tyre and top it up every three months.</p>'
)


def _discourse_forum(url: str) -> None:
    """Tables shaped like Discourse's, created and filled by 'Discourse' (not the sidecar)."""
    folder = resources.files("sidecar.db") / "migrations" / "forum"
    with psycopg.connect(url) as conn:
        for name in ("0001_forum_tables.sql", "0003_tag_groups.sql"):  # as Discourse has them
            conn.execute((folder / name).read_text("utf-8").encode())
        conn.execute("""
            INSERT INTO categories (id, name, name_lower, slug, read_restricted, created_at,
                                    updated_at)
            VALUES (1, 'Repairs', 'repairs', 'repairs', false, now(), now()),
                   (2, 'Staff', 'staff', 'staff', true, now(), now());
            INSERT INTO topics (id, title, slug, category_id, archetype, bumped_at, created_at,
                                updated_at)
            VALUES (1, 'Tubeless tyre sealant', 'tubeless-tyre-sealant', 1, 'regular', now(),
                    now(), now()),
                   (2, 'Sealant supplier contract', 'sealant-supplier-contract', 2, 'regular',
                    now(), now(), now()),
                   (3, 'Private: sealant order', 'private-sealant-order', NULL,
                    'private_message', now(), now(), now());
        """)
        rows = [
            (1, 1, 1, "<p>Which sealant for tubeless tyres?</p>", 1, False),
            (2, 1, 2, COOKED_QUOTE, 1, False),
            (3, 1, 3, "<p>Sealant spam SECRETWHISPER</p>", 4, False),
            (4, 1, 4, "<p>Sealant rant SECRETHIDDEN</p>", 1, True),
            (5, 2, 1, "<p>Sealant supplier price SECRETSTAFF</p>", 1, False),
            (6, 3, 1, "<p>My sealant order SECRETPM</p>", 1, False),
        ]
        for pid, tid, number, cooked, post_type, hidden in rows:
            conn.execute(
                "INSERT INTO posts (id, topic_id, post_number, raw, cooked, post_type, hidden,"
                " created_at, updated_at, last_version_at)"
                " VALUES (%s, %s, %s, 'raw markdown', %s, %s, %s, now(), now(), now())",
                (pid, tid, number, cooked, post_type, hidden))
        conn.execute("""
            INSERT INTO post_search_data (post_id, search_data, raw_data, locale, version)
            SELECT p.id,
                   setweight(to_tsvector('english', t.title), 'A')
                   || setweight(to_tsvector('english', coalesce(c.name, '')), 'B')
                   || setweight(to_tsvector('english',
                                regexp_replace(p.cooked, '<[^>]+>', ' ', 'g')), 'D'),
                   regexp_replace(p.cooked, '<[^>]+>', ' ', 'g'), 'en', 1
            FROM posts p JOIN topics t ON t.id = p.topic_id
            LEFT JOIN categories c ON c.id = t.category_id
        """)


def _forum_schema(url: str) -> list[Any]:
    with psycopg.connect(url) as conn:
        return conn.execute("""
            SELECT table_name, column_name, data_type, is_nullable, column_default
            FROM information_schema.columns WHERE table_schema = 'public'
              AND table_name IN ('posts', 'topics', 'categories', 'tags', 'topic_tags',
                                 'post_search_data', 'users')
            UNION ALL
            SELECT tablename, indexname, indexdef, '', '' FROM pg_indexes
            WHERE schemaname = 'public' AND tablename IN ('posts', 'topics', 'categories',
                  'tags', 'topic_tags', 'post_search_data', 'users')
            ORDER BY 1, 2""").fetchall()


def _forum_rows(url: str) -> list[Any]:
    with psycopg.connect(url) as conn:
        return [conn.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()  # type: ignore[arg-type]
                for t in ("posts", "topics", "categories", "post_search_data")]


def test_the_sidecar_embeds_and_searches_a_forum_it_does_not_own(
    db_url: str, redis_url: str, tmp_path: Path, minilm: Any
) -> None:
    _discourse_forum(db_url)
    schema, rows = _forum_schema(db_url), _forum_rows(db_url)
    info = upgrade(db_url)
    assert info["forum_owned"] is False
    res = start_resources(make_settings(tmp_path, db_url, redis_url), embedder=minilm)
    try:
        done = backfill_sync(res, 1, progress=False)
        assert done.embedded == 2  # the two public posts; whisper, hidden, staff, PM never
        for mode in Mode:
            results, _ = res.search.search("how much tubeless sealant per tyre", 5,
                                           SearchOptions(mode=mode))
            assert [r.post.topic_id for r in results] == [1], mode
            assert results[0].post.post_number in (1, 2)
            text = " ".join(r.excerpt for r in results)
            assert "SECRET" not in text
        # Evidence reads Discourse's cooked HTML, without the quoted post.
        best, _ = res.search.search("latex sealant top it up every three months", 1,
                                    SearchOptions(mode=Mode.KEYWORD))
        assert best[0].post.post_number == 2
        assert "60 ml" in best[0].excerpt and "bob:" not in best[0].excerpt
        with psycopg.connect(db_url) as conn:
            assert not forum_owned(conn)
            with pytest.raises(ConfigurationError, match="real forum"):
                import_dump(conn, write_dump(tmp_path / "dump", [category(9, "X")],
                                             [topic(9, "x", 9)], [post(9, 9, 1, "x")]),
                            "english")
    finally:
        res.close()
    # Not a column, an index or a row of the forum's tables changed.
    assert _forum_schema(db_url) == schema
    assert _forum_rows(db_url) == rows
