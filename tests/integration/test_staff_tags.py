"""Staff-only tags are never embedded, nor indexed for the keyword leg: a tag that only some groups
may see is left out of the text and of the keyword documents.

Discourse hides a tag from anonymous readers when it belongs to a tag group that the "everyone"
group (id 0) may not see, unless another group holding it may (``DiscourseTagging``'s hidden
tags). The forum here has a public tag, a staff-only one, one shared by a staff group and an open
group, and one in a group everyone may only see (permission 3, "see only").
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

from sidecar.core.strategy import prepare_text
from sidecar.db.embeddings import EmbeddingRow, register_model, upsert_embeddings
from sidecar.db.forum_read import post_sources
from sidecar.db.migrate import upgrade
from sidecar.db.schema import with_search_path
from sidecar.db.stale import mark_checked, stale_candidates

STAFF_GROUP = 3  # Discourse's auto group "staff"
EVERYONE = 0


def _forum(url: str) -> None:
    upgrade(url)  # an owned forum: the forum track creates the tag group tables too
    with psycopg.connect(url) as conn:
        conn.execute("""
            INSERT INTO categories (id, name, name_lower, slug, read_restricted, created_at,
                                    updated_at)
            VALUES (1, 'Repairs', 'repairs', 'repairs', false, now(), now());
            INSERT INTO topics (id, title, slug, category_id, archetype, bumped_at, created_at,
                                updated_at)
            VALUES (1, 'Tubeless tyre sealant', 'tubeless', 1, 'regular', now(), now(), now());
            INSERT INTO posts (id, topic_id, post_number, raw, cooked, created_at, updated_at,
                               last_version_at)
            VALUES (1, 1, 1, 'Which sealant?', '<p>Which sealant?</p>', now(), now(), now());
            INSERT INTO tags (id, name, created_at, updated_at)
            VALUES (1, 'tyres', now(), now()), (2, 'legal-hold', now(), now()),
                   (3, 'shared', now(), now()), (4, 'announced', now(), now());
            INSERT INTO topic_tags (topic_id, tag_id, created_at, updated_at)
            SELECT 1, id, now(), now() FROM tags;
            INSERT INTO tag_groups (id, name, created_at, updated_at)
            VALUES (1, 'Staff only', now(), now()), (2, 'Open', now(), now()),
                   (3, 'Read only', now(), now());
            INSERT INTO tag_group_memberships (tag_id, tag_group_id, created_at, updated_at)
            VALUES (2, 1, now(), now()), (3, 1, now(), now()), (3, 2, now(), now()),
                   (4, 3, now(), now());
        """)
        conn.execute(
            "INSERT INTO tag_group_permissions (tag_group_id, group_id, permission_type,"
            " created_at, updated_at) VALUES (1, %s, 1, now(), now()), (2, %s, 1, now(), now()),"
            " (3, %s, 3, now(), now())", (STAFF_GROUP, EVERYONE, EVERYONE))


def test_a_staff_only_tag_is_never_embedded(db_url: str) -> None:
    _forum(db_url)
    with psycopg.connect(db_url, row_factory=dict_row) as conn:
        [source] = post_sources(conn, [1])
    assert source.tags == ("announced", "shared", "tyres")
    for strategy in (1, 2):
        text = prepare_text(source, strategy, lambda t: t)
        assert "legal-hold" not in text
    assert "announced, shared, tyres" in prepare_text(source, 1, lambda t: t)


def test_posts_embedded_with_a_staff_only_tag_are_read_again(db_url: str) -> None:
    """Vectors from before the rule: the upgrade sets their checks back, so the next backfill's
    drift phase re-reads them (and re-embeds them, their digest having changed)."""
    _forum(db_url)
    with psycopg.connect(with_search_path(db_url), row_factory=dict_row) as conn:
        register_vector(conn)
        model = register_model(conn, name="m", dimensions=4, version=1)
        upsert_embeddings(conn, model, 1, 1, [EmbeddingRow(1, "old digest", np.ones(4))])
        mark_checked(conn, model, 1, [1])  # checked just now: not a drift candidate
        assert stale_candidates(conn, model, 1, 1, phases=["drift"]) == []
        conn.execute("DELETE FROM sidecar.sidecar_schema_migrations"
                     " WHERE track = 'sidecar' AND name = 'recheck_staff_tags'")
    upgrade(db_url)  # what `sidecar db upgrade` does once on an existing install
    with psycopg.connect(with_search_path(db_url), row_factory=dict_row) as conn:
        drift = stale_candidates(conn, model, 1, 1, phases=["drift"])
    assert [c.post_id for c in drift] == [1]


def test_a_staff_only_tag_is_not_in_the_keyword_index(db_url: str, tmp_path: Path) -> None:
    """Fault (the review's): the keyword documents are Discourse's search data, whose tag weight
    holds every tag, so a keyword search found a topic by its staff-only tag."""
    from sidecar.db import Database
    from sidecar.db.forum_write import reindex_search_data
    from sidecar.db.keyword_sql import log_posts
    from sidecar.keyword.leg import keyword_leg
    from sidecar.keyword.node import KeywordIndex

    _forum(db_url)
    with psycopg.connect(db_url) as conn:  # the search data as Discourse makes it: every tag
        conn.execute("INSERT INTO post_search_data (post_id, raw_data, locale, version)"
                     " VALUES (1, 'Which sealant?', 'english', 0)")
        reindex_search_data(conn, "english")
        [tsv] = conn.execute("SELECT search_data::text FROM post_search_data").fetchone() or [""]
    assert "'legal-hold':" in tsv  # what Discourse indexes, and the sidecar must not serve
    db = Database(db_url)
    db.open()
    index = KeywordIndex(db, tmp_path / "state", "english")

    def found(query: str) -> list[int]:
        searcher = index.searcher()
        assert searcher is not None
        with db.connection() as conn:
            return [h.topic_id for h in keyword_leg(conn, searcher, ts_config="english",
                                                     query=query, k=5)]

    try:
        for step in ("rebuild", "sync"):  # a whole build, then a post's document read again
            if step == "rebuild":
                index.rebuild()
            else:
                with db.connection() as conn:
                    log_posts(conn, [1])
                assert (index.sync() or index.rebuild()).posts == 1
            assert found("legal-hold") == [] and found("legal") == [], step
            # Visible tags stay searchable: open, shared with an open group, or see-only.
            for tag in ("tyres", "shared", "announced"):
                assert found(tag) == [1], (step, tag)
            assert found("sealant") == [1], step  # title and body untouched
    finally:
        index.close()
        db.close()
