"""The vector-search benchmark: synthetic data, binary COPY, recall against exact search."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector

from sidecar.bench import vecdata, vectors_part
from sidecar.bench.report import BenchContext
from sidecar.db.migrate import ensure_pgvector
from tests.conftest import make_settings


def test_clustered_vectors_have_near_neighbours_and_unrelated_points() -> None:
    space = vecdata.ClusteredSphere(128, 3000, seed=1)
    x = space.sample(1000, seed=0).astype(np.float32)
    assert np.allclose(np.linalg.norm(x, axis=1), 1.0, atol=1e-2)
    sims = x @ x.T
    np.fill_diagonal(sims, np.nan)
    nearest = np.nanmax(sims, axis=1)
    # Neighbours close by, most pairs far apart: what makes ANN recall meaningful.
    assert np.median(nearest) > 0.5
    assert np.nanmean(sims) < 0.25
    # Reproducible: same seeds, same vectors.
    assert np.array_equal(space.sample(10, seed=3), vecdata.ClusteredSphere(128, 3000, 1)
                          .sample(10, seed=3))


def test_exact_top_k_matches_brute_force_across_blocks() -> None:
    rng = np.random.default_rng(0)
    data = rng.standard_normal((500, 16)).astype(np.float16)
    queries = rng.standard_normal((7, 16)).astype(np.float16)
    found = vecdata.exact_top_k(data, queries, 5, block=64)
    d = data.astype(np.float32) / np.linalg.norm(data.astype(np.float32), axis=1, keepdims=True)
    q = queries.astype(np.float32)
    expected = np.argsort(-(q @ d.T), axis=1)[:, :5] + 1
    assert np.array_equal(found, expected)


def test_recall_at_k() -> None:
    truth = np.array([[1, 2, 3], [4, 5, 6]])
    assert vecdata.recall_at_k([[1, 2, 3], [4, 9, 8]], truth, 3) == pytest.approx((1 + 1 / 3) / 2)
    assert vecdata.recall_at_k([[3, 2, 1], [6, 5, 4]], truth, 3) == 1.0


def test_binary_copy_round_trips_through_postgres(db_url: str) -> None:
    vectors = vecdata.ClusteredSphere(12, 100, seed=2).sample(50, seed=0)
    with psycopg.connect(db_url, autocommit=True) as conn:
        ensure_pgvector(conn)
        register_vector(conn)
        conn.execute("CREATE TABLE v (id int4, embedding halfvec(12))")
        with conn.cursor() as cur, cur.copy(
                "COPY v (id, embedding) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(vecdata.COPY_HEADER)
            copy.write(vecdata.copy_binary_rows(101, vectors[:20]))
            copy.write(vecdata.copy_binary_rows(121, vectors[20:]))
            copy.write(vecdata.COPY_TRAILER)
        rows = conn.execute("SELECT id, embedding FROM v ORDER BY id").fetchall()
    assert [r[0] for r in rows] == list(range(101, 151))
    stored = np.stack([r[1].to_numpy() for r in rows]).astype(np.float16)
    assert np.array_equal(stored, vectors)


def test_vectors_part_small_run(tmp_path: Path, db_url: str, redis_url: str) -> None:
    settings = make_settings(tmp_path, db_url, redis_url)
    ctx = BenchContext(settings, tmp_path / "out", quick=True,
                       extras={"vectors": 3000, "dims": (64,)})
    ctx.out_dir.mkdir(parents=True)
    [table] = vectors_part.run(ctx)
    rows: dict[tuple[Any, Any], list[Any]] = {(r[0], r[1]): r for r in table.rows}
    recall = table.columns.index("recall@10")
    assert rows[("exact scan", None)][recall] >= 0.99  # PostgreSQL agrees with numpy
    for ef in vectors_part.EF_SEARCH:
        hnsw = rows[("HNSW halfvec cosine", ef)]
        assert 0.5 < hnsw[recall] <= 1.0
        assert hnsw[table.columns.index("index MB")] > 0
    assert ("binary HNSW x10 + re-rank", 40) not in rows  # ef below the candidates: no row
    assert not any("not comparable" in note for note in table.notes)
    assert (ctx.out_dir / "vectors.json").is_file()
    with psycopg.connect(db_url) as conn:  # the scratch database is gone
        left = conn.execute("SELECT count(*) FROM pg_database WHERE datname LIKE "
                            "'sidecar_bench_vectors_%'").fetchone()
    assert left is not None and left[0] == 0


def test_vectors_stay_in_their_rows_and_the_out_of_line_baseline_runs_beside(
        tmp_path: Path, db_url: str, redis_url: str) -> None:
    """1,024 dims: the sidecar's storage keeps vectors inline (no TOAST); the bench times the
    old out-of-line layout side by side, on the same rows, with the same answers."""
    settings = make_settings(tmp_path, db_url, redis_url)
    ctx = BenchContext(settings, tmp_path / "out", quick=True,
                       extras={"vectors": 1500, "dims": (1024,)})
    ctx.out_dir.mkdir(parents=True)
    [table] = vectors_part.run(ctx)
    rows: dict[tuple[Any, Any], list[Any]] = {(r[0], r[1]): r for r in table.rows}
    recall = table.columns.index("recall@10")
    assert rows[("exact scan", None)][recall] >= 0.99
    assert rows[("exact scan, vector out of line", None)][recall] >= 0.99
    inline = rows[("binary HNSW x4 + re-rank", 100)][recall]
    assert rows[("binary HNSW x4 + re-rank, vector out of line", 100)][recall] == \
        pytest.approx(inline, abs=0.05)  # two graphs built apart: close, not equal
    [raw] = json.loads((ctx.out_dir / "vectors.json").read_text())
    assert raw["toast_bytes"] < raw["table_bytes"] / 50  # the TOAST table's empty pages only
