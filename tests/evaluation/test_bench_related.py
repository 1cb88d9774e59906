"""The related-topics benchmark part at a tiny size: search, related cold and warm, one run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sidecar.bench import related_part
from sidecar.bench.report import BenchContext

DEMO = Path(__file__).resolve().parents[2] / "sidecar" / "demo"


def test_related_part_tiny_forum(tmp_path: Path, eval_settings: Any) -> None:
    ctx = BenchContext(eval_settings, tmp_path / "out" / "related", extras={
        "dump": DEMO, "posts": [2000], "private_share": 0.5, "dims": [384],
        "vectors": "public"})
    ctx.out_dir.mkdir(parents=True)
    [table] = related_part.run(ctx)
    rows = json.loads((ctx.out_dir / "scale.json").read_text())["rows"]
    assert [r["stage"] for r in rows] == ["keyword", "search", "related cold", "related warm"]
    assert len(table.rows) == 4
    cold, warm = rows[2], rows[3]
    for row in rows:
        assert row["private_returned"] == 0, row  # nothing shown, nor asked, is private
        assert 0 < row["p50_ms"] <= row["p95_ms"]
    for row in (cold, warm):
        assert row["topics"] == row["queries"] and row["queries"] > 50
        assert row["cache_as_expected"] == row["topics"], row  # cold: all misses; warm: hits
        assert row["empty"] == 0
        # Against search measured in the same run (the rows' times are rounded).
        expected = row["p50_ms"] / rows[1]["p50_ms"]
        assert abs(row["p50_vs_search"] - expected) <= 0.01 * expected + 0.01
    # Warm: no leg runs, the list comes from Redis.
    assert {"semantic", "keyword", "link"} <= set(cold["step_ms"])
    assert not {"semantic", "keyword", "link"} & set(warm["step_ms"])
    assert warm["cpu_ms"] < cold["cpu_ms"]
