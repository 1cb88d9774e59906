"""The rerank chain's benchmark part: a synthetic Discourse-shaped forum, the chain timed."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg

from sidecar.bench import chain_part
from sidecar.bench.report import BenchContext
from tests.conftest import make_settings


def test_chain_part_small_run(tmp_path: Path, db_url: str, redis_url: str) -> None:
    settings = make_settings(tmp_path, db_url, redis_url)
    ctx = BenchContext(settings, tmp_path / "out", quick=True,
                       extras={"topics": 400, "rounds": 5, "dims": (32,)})
    ctx.out_dir.mkdir(parents=True)
    [table] = chain_part.run(ctx)
    names = [row[0] for row in table.rows]
    assert names[:4] == [name for name, _, _ in chain_part.VARIANTS]
    assert any(name.startswith("reference:") for name in names)
    p50, p95 = table.columns.index("total p50 ms"), table.columns.index("total p95 ms")
    for row in table.rows:
        assert 0 < row[p50] <= row[p95]
    features, vectors = table.columns.index("features p95 ms"), table.columns.index(
        "vectors p95 ms")
    whole, mmr_only, boosts_only = table.rows[:3]
    assert whole[features] > 0 and whole[vectors] > 0
    assert mmr_only[features] == 0 and boosts_only[vectors] == 0  # only what a stage needs
    raw = json.loads((ctx.out_dir / "chain.json").read_text())
    assert len(raw[0]["variants"]["MMR only"]["ms"]) == 5
    with psycopg.connect(db_url) as conn:  # the scratch database is gone
        left = conn.execute("SELECT count(*) FROM pg_database WHERE datname LIKE "
                            "'sidecar_bench_chain_%'").fetchone()
    assert left is not None and left[0] == 0
