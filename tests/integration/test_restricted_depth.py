"""Read restrictions at any depth: A restricted -> B -> C makes C private, in every query.

Discourse prevents such chains; an imported dump does not, and a dump may even hold a parent
cycle. The public filter (``sidecar.db.public``) must see through both, and stay one cheap,
uncorrelated condition (EXPLAIN ANALYZE: the category tree is walked once per query).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.rows import dict_row

from sidecar.db.embeddings import EmbeddingRow, register_model, upsert_embeddings
from sidecar.db.migrate import upgrade
from sidecar.db.schema import with_search_path
from sidecar.ingest.importer import import_dump
from tests.helpers import category, post, topic, write_dump

# category id -> (name, parent, restricted)
CATEGORIES = {
    1: ("Staff", None, True),
    2: ("Staff projects", 1, False),       # B: a child of a restricted category
    3: ("Staff project notes", 2, False),  # C: two levels under it
    4: ("Loop one", 5, False),             # a public parent cycle
    5: ("Loop two", 4, False),
    6: ("Secret loop", 7, True),           # a cycle through a restricted category
    7: ("Secret loop child", 6, False),
    8: ("Open", None, False),
    9: ("Open child", 8, False),
}
PUBLIC_CATEGORIES = {4, 5, 8, 9}


def _dump(directory: Path) -> Path:
    cats = [category(cid, name, restricted, parent_category_id=parent)
            for cid, (name, parent, restricted) in CATEGORIES.items()]
    topics = [topic(100 + cid, f"Topic in {name}", cid, posts_count=2)
              for cid, (name, _, _) in CATEGORIES.items()]
    posts = []
    for cid in CATEGORIES:
        posts += [post(1000 + 10 * cid, 100 + cid, 1, f"canary{cid} opening words here"),
                  post(1001 + 10 * cid, 100 + cid, 2, f"canary{cid} a reply with words")]
    return write_dump(directory, cats, topics, posts)


def _expected(cids: set[int]) -> set[int]:
    return {1000 + 10 * c for c in cids} | {1001 + 10 * c for c in cids}


@pytest.fixture
def forum(db_url: str, tmp_path: Path) -> dict[str, Any]:
    upgrade(db_url)
    with psycopg.connect(db_url) as conn:
        report = import_dump(conn, _dump(tmp_path / "dump"), "english")
    return {"url": db_url, "report": report}


def test_the_importer_reports_posts_hidden_at_any_depth(forum: dict[str, Any]) -> None:
    visibility = forum["report"].as_dict()["visibility"]
    assert visibility == {"public": 2 * len(PUBLIC_CATEGORIES),
                          "not_public": 2 * (len(CATEGORIES) - len(PUBLIC_CATEGORIES)),
                          "in_restricted_categories": 2 * (len(CATEGORIES)
                                                           - len(PUBLIC_CATEGORIES))}


def test_every_reader_sees_only_the_posts_of_public_categories(forum: dict[str, Any],
                                                               tmp_path: Path) -> None:
    from sidecar.db import Database
    from sidecar.db.evidence_read import neighbour_posts
    from sidecar.db.forum_read import forum_counts, post_sources, public_posts
    from sidecar.db.public import public_post_ids, public_posts_in_scope
    from sidecar.keyword import KeywordIndex, keyword_leg

    every = sorted(_expected(set(CATEGORIES)))
    public = _expected(PUBLIC_CATEGORIES)
    with psycopg.connect(forum["url"], row_factory=dict_row) as conn:
        assert set(public_posts(conn, every)) == public  # hydration and the sanitizer re-check
        assert {s.post_id for s in post_sources(conn, every)} == public  # what gets embedded
        assert set(public_post_ids(conn, every)) == public  # forum events
        assert set(public_posts_in_scope(conn, category_ids=list(CATEGORIES))) == public
        assert forum_counts(conn)["public_posts"] == len(public)
        anchors = [(100 + c, 1) for c in CATEGORIES]
        near = neighbour_posts(conn, anchors, 1)  # evidence neighbours
        assert {p.post_id for found in near.values() for p in found} == \
            {1001 + 10 * c for c in PUBLIC_CATEGORIES}
    # The keyword leg: its index holds public posts only, and the filter applies again at
    # query time.
    db = Database(forum["url"])
    db.open()
    index = KeywordIndex(db, tmp_path / "state", "english")
    try:
        index.rebuild()
        searcher = index.searcher()
        assert searcher is not None
        with db.connection() as conn:
            for cid in CATEGORIES:
                hits = keyword_leg(conn, searcher, ts_config="english", query=f"canary{cid}",
                                   k=10)
                assert {h.post_id for h in hits} == (_expected({cid}) & public), cid
    finally:
        index.close()
        db.close()


def test_a_parent_turned_restricted_removes_the_vectors_of_its_whole_subtree(
    forum: dict[str, Any]
) -> None:
    from sidecar.db.embeddings import delete_not_public

    url = forum["url"]
    with psycopg.connect(with_search_path(url), row_factory=dict_row) as conn:
        register_vector(conn)
        model = register_model(conn, name="m", dimensions=4, version=1)
        rows = [EmbeddingRow(pid, "d", np.ones(4, dtype=np.float32))
                for pid in _expected(PUBLIC_CATEGORIES)]
        upsert_embeddings(conn, model, 1, 1, rows)
        conn.execute("UPDATE categories SET read_restricted = true WHERE id = 8")
        removed = delete_not_public(conn, category_ids=[8])
        left = {r["post_id"] for r in conn.execute(
            "SELECT post_id FROM ai_posts_embeddings").fetchall()}
    assert removed == 4
    assert left == _expected({4, 5})


def _plan(conn: psycopg.Connection[Any], query: sql.Composable) -> list[dict[str, Any]]:
    row = conn.execute(sql.SQL("EXPLAIN (ANALYZE, FORMAT JSON) {}").format(query)).fetchone()
    assert row is not None
    doc = row[0] if not isinstance(row[0], str) else json.loads(row[0])
    nodes: list[dict[str, Any]] = []

    def walk(node: dict[str, Any]) -> None:
        nodes.append(node)
        for child in node.get("Plans", []):
            walk(child)

    walk(doc[0]["Plan"])
    return nodes


def test_the_category_tree_is_walked_once_per_query(forum: dict[str, Any]) -> None:
    from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE

    query = sql.SQL("SELECT p.id FROM posts p {joins} WHERE {public}").format(
        joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE))
    with psycopg.connect(forum["url"]) as conn:
        conn.execute("SET enable_hashjoin = off")  # push the planner to a per-row filter
        nodes = _plan(conn, query)
    recursive = [n for n in nodes if n["Node Type"] == "Recursive Union"]
    assert recursive, [n["Node Type"] for n in nodes]
    # Evaluated once (an InitPlan or a hashed SubPlan), never once per post.
    assert all(n["Actual Loops"] == 1 for n in recursive), recursive
