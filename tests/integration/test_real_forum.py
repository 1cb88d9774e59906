"""Beside a real forum: the sidecar reads Discourse's tables, embeds, searches, never alters them.

The forum here is made the way Discourse makes it, not by `sidecar import`: its tables exist
before the sidecar arrives (no ownership marker), posts carry Discourse's cooked HTML (quotes as
`aside.quote`), and `post_search_data` is filled by "Discourse" (weights A title, B category,
D body). The sidecar must treat the database as someone else's.
"""

from __future__ import annotations

import os
import subprocess
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
        for name in ("0001_forum_tables.sql", "0003_tag_groups.sql",  # as Discourse has them
                     "0004_shared_drafts.sql"):
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


def _discourse_ai(url: str) -> None:
    """discourse-ai's registry and vectors' table, made by the forum's owner, with a vector of
    its own (of the staff-only post: discourse-ai embeds read-restricted categories)."""
    with psycopg.connect(url) as conn:
        conn.execute("""
            CREATE EXTENSION IF NOT EXISTS vector;
            CREATE TABLE embedding_definitions (id bigserial PRIMARY KEY,
                display_name varchar NOT NULL, dimensions int NOT NULL, api_key varchar);
            INSERT INTO embedding_definitions (display_name, dimensions, api_key)
            VALUES ('bge-large-en', 3, 'SECRET-KEY');
            CREATE TABLE ai_posts_embeddings (post_id bigint NOT NULL, model_id bigint NOT NULL,
                model_version int NOT NULL, strategy_id int NOT NULL,
                strategy_version int NOT NULL, digest text NOT NULL, embeddings halfvec NOT NULL,
                created_at timestamp(6) NOT NULL, updated_at timestamp(6) NOT NULL);
            CREATE UNIQUE INDEX index_ai_posts_embeddings_on_model_strategy_post
                ON ai_posts_embeddings (model_id, strategy_id, post_id);
            INSERT INTO ai_posts_embeddings
            VALUES (5, 1, 1, 1, 1, 'digest', '[1,0,0]', now(), now());
        """)


def test_beside_discourse_ai_the_role_shares_its_table_and_its_owner_builds_the_index(
    db_url: str, redis_url: str, tmp_path: Path, minilm: Any
) -> None:
    from jobs import driver
    from jobs.batch import run_sync
    from sidecar.db.grants_check import check_grants
    from sidecar.db.owner import IndexBuild, owner_steps
    from sidecar.db.vector_index import index_name, index_valid
    from sidecar.runtime.bootstrap import sync_keyword
    from tests.conftest import sidecar_url
    from tests.helpers import sidecar_command

    _discourse_forum(db_url)
    _discourse_ai(db_url)
    schema, rows = _forum_schema(db_url), _forum_rows(db_url)
    role = sidecar_url(db_url)
    assert upgrade(role)["forum_owned"] is False  # the role's own schema, nothing of theirs
    with psycopg.connect(role) as conn:
        report = check_grants(conn)
        assert report.ok, report.as_dict()
        assert any("discourse-ai's" in n for n in report.notes)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SELECT api_key FROM embedding_definitions")
    res = start_resources(make_settings(tmp_path, role, redis_url), embedder=minilm)
    try:
        assert res.model.id >= 100_001  # far from discourse-ai's definitions
        run = run_sync(res, driver.start_run(res, enqueue=False).id)
        assert (run.stop_reason, run.done) == ("done", 2)
        assert run.index_status and run.index_status.startswith("waiting for the table's owner")
        sync_keyword(res)
        results, _ = res.search.search("how much tubeless sealant per tyre", 5,
                                       SearchOptions(mode=Mode.SEMANTIC))
        assert [r.post.topic_id for r in results] == [1]  # an exact scan meanwhile
        name = index_name(res.model.id, 1, "halfvec")
        with psycopg.connect(role, row_factory=psycopg.rows.dict_row) as conn:
            steps = owner_steps(conn, IndexBuild())
        assert any(name in s and "CONCURRENTLY" in s for s in steps), steps
        # The owner's part, run once by a superuser: `sidecar db upgrade --as-owner`.
        done = subprocess.run([*sidecar_command(), "db", "upgrade", "--as-owner", "--role",
                               "sidecar"], env={**os.environ, "DATABASE_URL": db_url},
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        with psycopg.connect(role, row_factory=psycopg.rows.dict_row) as conn:
            assert index_valid(conn, name) is True
            assert owner_steps(conn, IndexBuild()) == []
    finally:
        res.close()
    with psycopg.connect(db_url) as conn:  # discourse-ai's own vector is untouched
        assert conn.execute("SELECT post_id, digest FROM ai_posts_embeddings"
                            " WHERE model_id = 1").fetchall() == [(5, "digest")]
    assert _forum_schema(db_url) == schema
    assert _forum_rows(db_url) == rows
