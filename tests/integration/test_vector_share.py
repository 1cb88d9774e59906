"""Vectors the public filter drops (discourse-ai's, of private posts): counted, never returned.

The sidecar's backfill stores public posts only; discourse-ai may store the rest under the same
model and strategy. The semantic leg scales ``hnsw.ef_search`` by the index's public share.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from pgvector import HalfVector

from sidecar.db.public import public_post_ids
from sidecar.db.search_sql import EF_SEARCH_MAX, semantic_leg
from sidecar.db.vector_share import ShareCache, estimate_share, scaled_ef_search


@pytest.mark.parametrize(("ef", "share", "expected"), [
    (600, 1.0, 600), (600, 0.75, 800), (600, 0.5, 1000), (40, 0.5, 80), (40, 0.0, 1000),
    (600, 1.5, 600),  # never below the minimum, whatever the estimate
])
def test_ef_search_keeps_the_public_candidates_examined(ef: int, share: float,
                                                        expected: int) -> None:
    assert scaled_ef_search(ef, share, EF_SEARCH_MAX) == expected


def _add_private_vectors(conn: Any, model_id: int, vector: Any) -> tuple[set[int], int]:
    """Vectors for every private post of the demo, as discourse-ai's backfill may store them,
    all equal to ``vector`` (the nearest there are to a question embedded as it):
    (the posts, how many of them in private messages)."""
    every = [r["id"] for r in conn.execute("SELECT id FROM posts").fetchall()]
    private = sorted(set(every) - set(public_post_ids(conn, every)))
    rows = conn.execute(
        """
        INSERT INTO ai_posts_embeddings (post_id, model_id, model_version, strategy_id,
            strategy_version, digest, embeddings, created_at, updated_at)
        SELECT p.id, %(m)s, 1, 1, 1, 'discourse-ai', %(v)s, now(), now()
        FROM posts p WHERE p.id = ANY(%(ids)s)
        RETURNING post_id, (SELECT t.archetype FROM topics t JOIN posts p2
                            ON p2.topic_id = t.id WHERE p2.id = post_id) AS archetype
        """, {"m": model_id, "v": HalfVector(vector), "ids": private}).fetchall()
    return ({r["post_id"] for r in rows},
            sum(1 for r in rows if r["archetype"] == "private_message"))


def test_private_vectors_lower_the_share_and_never_come_back(demo_state: Any) -> None:
    model = demo_state.model
    vector = demo_state.embedder.embed(["zfs pool"], kind="query")[0]
    with demo_state.db.connection() as conn, conn.transaction(force_rollback=True):
        before = estimate_share(conn, model.id, 1)
        # The sidecar's own backfill: nothing but public posts.
        assert before.vectors > 0 and before.share == 1.0
        private, in_pms = _add_private_vectors(conn, model.id, vector)
        assert private and in_pms  # private messages (no category) count too
        after = estimate_share(conn, model.id, 1)
        assert (after.vectors, after.public) == (before.vectors + len(private), before.public)
        assert after.share == pytest.approx(before.public / (before.public + len(private)))
        # The private vectors are the question's own: the nearest of all, and filtered out.
        conn.execute("SET LOCAL enable_seqscan = off")  # the HNSW scan, even on a tiny forum
        hits = semantic_leg(conn, model_id=model.id, strategy_id=1,
                            dimensions=model.dimensions, vector=vector, k=50,
                            ef_search_min=20, public_share=after.share)
        ef = conn.execute("SELECT current_setting('hnsw.ef_search') AS ef").fetchone()["ef"]
        assert int(ef) == scaled_ef_search(20, after.share, EF_SEARCH_MAX) > 20
        assert len(hits) == 50 and not {h.post_id for h in hits} & private


def test_a_large_table_is_sampled(demo_state: Any) -> None:
    model = demo_state.model
    with demo_state.db.connection() as conn, conn.transaction(force_rollback=True):
        conn.execute("ANALYZE ai_posts_embeddings")  # reltuples, as autovacuum keeps it
        total = estimate_share(conn, model.id, 1, sample_rows=10**9).vectors
        sampled = estimate_share(conn, model.id, 1, sample_rows=total // 3)
    assert 0 < sampled.vectors < total
    assert sampled.share == 1.0


def test_one_estimate_serves_until_it_expires(demo_state: Any) -> None:
    cache, model = ShareCache(ttl_s=3600), demo_state.model
    with demo_state.db.connection() as conn:
        first = cache.get(conn, model.id, 1)
        with conn.transaction(force_rollback=True):
            added, _ = _add_private_vectors(conn, model.id, np.ones(model.dimensions))
            assert cache.get(conn, model.id, 1) is first  # cached
            cache.ttl_s = 0.0
            assert cache.get(conn, model.id, 1).vectors == first.vectors + len(added)


def test_the_search_trace_names_the_share(client: Any, auth: dict[str, str]) -> None:
    resp = client.post("/v1/search", json={"query": "ZFS pool scrub", "mode": "semantic"},
                       headers=auth)
    assert resp.status_code == 200, resp.json
    step = next(s for s in resp.json["trace"] if s["step"] == "semantic")
    assert step["detail"]["public_share"] == 1.0
