"""The partial HNSW index of a (model, strategy): built, matched by the search query, real Redis."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import psycopg
import pytest
import redis
from psycopg.rows import dict_row

from sidecar.db.embeddings import register_model
from sidecar.db.migrate import upgrade
from sidecar.db.schema import with_search_path
from sidecar.db.search_sql import semantic_leg
from sidecar.db.vector_index import ensure_index, index_name


def test_the_semantic_query_uses_the_partial_hnsw_index(demo_state: Any) -> None:
    model = demo_state.model
    name = index_name(model.id, 1, "halfvec")
    with demo_state.db.connection() as conn:
        definition = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (name,)).fetchone()
        assert definition is not None
        assert "hnsw" in definition["indexdef"] and "halfvec_cosine_ops" in definition["indexdef"]
        assert f"model_id = {model.id}" in definition["indexdef"]
        # Forbid sequential scans: if the query's expression or predicate did not match the
        # index, the planner would have no other way and EXPLAIN would not name the index.
        conn.execute("SET LOCAL enable_seqscan = off")
        conn.execute("SET LOCAL enable_sort = off")
        vector = demo_state.embedder.embed(["zfs pool"], kind="query")[0]
        plan = conn.execute(
            f"EXPLAIN SELECT e.post_id FROM ai_posts_embeddings e WHERE e.model_id = {model.id}"
            f" AND e.strategy_id = 1 ORDER BY e.embeddings::halfvec({model.dimensions})"
            f" <=> %s::halfvec({model.dimensions}) LIMIT 10",
            (np.asarray(vector).tolist().__str__(),),
        ).fetchall()
    assert any(name in row["QUERY PLAN"] for row in plan), plan


def _knobs(conn: Any) -> tuple[int, str, int]:
    row = conn.execute("SELECT current_setting('hnsw.ef_search') AS ef,"
                       " current_setting('hnsw.iterative_scan') AS scan,"
                       " current_setting('hnsw.max_scan_tuples') AS tuples").fetchone()
    return int(row["ef"]), row["scan"], int(row["tuples"])


def test_iterative_scans_fill_the_page_beyond_ef_search(demo_state: Any) -> None:
    model = demo_state.model
    vector = demo_state.embedder.embed(["zfs pool"], kind="query")[0]
    with demo_state.db.connection() as conn:
        stored = conn.execute(
            "SELECT count(*) AS n FROM ai_posts_embeddings WHERE model_id = %s"
            " AND strategy_id = 1", (model.id,)).fetchone()["n"]
        conn.execute("SET LOCAL enable_seqscan = off")  # the HNSW scan, even on a tiny forum
        hits = semantic_leg(conn, model_id=model.id, strategy_id=1,
                            dimensions=model.dimensions, vector=vector, k=150,
                            ef_search_min=20, scan_order="relaxed_order", max_scan_tuples=5000)
        assert _knobs(conn) == (20, "relaxed_order", 5000)
    # ef_search stays at its minimum: the iterative scan supplies the rest of the page, and
    # the relaxed order is sorted again.
    assert len(hits) == min(150, stored) > 20
    scores = [h.score for h in hits]
    assert scores == sorted(scores, reverse=True)


def test_without_iterative_scans_ef_search_is_raised_to_the_candidates_asked(
        demo_state: Any) -> None:
    vector = demo_state.embedder.embed(["zfs pool"], kind="query")[0]
    for order in ("off", "strict_order"):
        with demo_state.db.connection() as conn:
            semantic_leg(conn, model_id=demo_state.model.id, strategy_id=1,
                         dimensions=demo_state.model.dimensions, vector=vector, k=150,
                         iterative_scan=order != "off", scan_order=order, binary=True,
                         binary_overfetch=2)
            ef, scan, _ = _knobs(conn)
        if order == "off":
            assert (ef, scan) == (300, "off")
        else:
            assert (ef, scan) == (40, "strict_order")


def test_a_real_redis_url_replaces_the_embedded_one(tmp_path: Any, db_url: str,
                                                    minilm: Any) -> None:
    # These machines run a Redis on 127.0.0.1:6379; a user's machine may not.
    url = "redis://127.0.0.1:6379/15"
    try:
        redis.Redis.from_url(url, socket_connect_timeout=1).ping()
    except redis.RedisError:
        pytest.skip("no Redis on 127.0.0.1:6379")
    from sidecar.runtime.resources import start_resources
    from tests.conftest import make_settings

    res = start_resources(make_settings(tmp_path, db_url, url), embedder=minilm)
    try:
        assert res.urls.redis_url == url and not res.urls.embedded_redis
        assert res.redis.ping()
    finally:
        res.close()


def test_a_binary_index_of_few_dimensions_is_warned_of(db_url: str, caplog: Any) -> None:
    upgrade(db_url)
    with psycopg.connect(with_search_path(db_url), row_factory=dict_row) as conn:
        small = register_model(conn, name="small", dimensions=384, version=1)
        large = register_model(conn, name="large", dimensions=1024, version=1)
    with caplog.at_level(logging.WARNING, logger="sidecar.db.vector_index"):
        assert ensure_index(db_url, large, 1, "binary")
        assert ensure_index(db_url, small, 1, "halfvec")
        assert not caplog.records
        assert ensure_index(db_url, small, 1, "binary")
    assert [r.getMessage() for r in caplog.records] == [
        "binary index for small: 384 bits per vector are too coarse to find the nearest posts"
        " reliably; SIDECAR_INDEX_KIND=halfvec serves them better"]


INJECTED = "1GB'; DROP TABLE posts; --"


def test_the_index_build_memory_is_a_size_never_pasted_into_sql(db_url: str) -> None:
    """Fault (issue 37): the owner's script read ``SET maintenance_work_mem = '{build_mem}'``,
    SIDECAR_INDEX_BUILD_MEM pasted unchecked into SQL run as the table's owner."""
    from pgvector.psycopg import register_vector
    from pydantic import ValidationError

    from sidecar.config.settings import Settings
    from sidecar.db.embeddings import EmbeddingRow, upsert_embeddings
    from sidecar.db.owner import IndexBuild, owner_steps
    from sidecar.errors import ConfigurationError

    for bad in (INJECTED, "2GB\n", "lots"):
        with pytest.raises(ValidationError, match="memory size"):
            Settings(index_build_mem=bad)
    assert Settings(index_build_mem="2GB").index_build_mem == "2GB"
    assert Settings().index_build_mem == ""
    upgrade(db_url)
    with psycopg.connect(with_search_path(db_url), row_factory=dict_row) as conn:
        register_vector(conn)
        model = register_model(conn, name="m", dimensions=3, version=1)
        upsert_embeddings(conn, model, 1, 1, [EmbeddingRow(1, "d", np.ones(3, np.float32))])
        conn.commit()
        steps = owner_steps(conn, IndexBuild(build_mem="64MB"))
        assert steps[0] == "SET maintenance_work_mem = '64MB'"  # a literal, quoted
        assert any(index_name(model.id, 1, "halfvec") in s for s in steps[1:])
        with pytest.raises(ConfigurationError, match="SIDECAR_INDEX_BUILD_MEM"):
            owner_steps(conn, IndexBuild(build_mem=INJECTED))
    with pytest.raises(ConfigurationError, match="SIDECAR_INDEX_BUILD_MEM"):
        ensure_index(db_url, model, 1, build_mem=INJECTED)
