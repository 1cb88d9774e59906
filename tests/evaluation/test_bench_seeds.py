"""The generator check: real posts against generated ones, as the HNSW index sees them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from sidecar.bench import seeds_part
from sidecar.bench.report import BenchContext

DEMO = Path(__file__).resolve().parents[2] / "sidecar" / "demo"


def test_lid_tells_a_flat_set_from_a_full_one() -> None:
    rng = np.random.default_rng(0)
    basis = np.linalg.qr(rng.standard_normal((64, 64)))[0].astype(np.float32)

    def unit(x: np.ndarray) -> np.ndarray:
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    # Questions drawn like the posts: a 2-dimensional patch of the sphere, and all 64 dims.
    flat = unit(rng.standard_normal((4020, 2)).astype(np.float32) @ basis[:2] * 0.3 + basis[2])
    full = unit(rng.standard_normal((4020, 64)).astype(np.float32) * 0.3 / 8 + basis[2])
    low = seeds_part.set_shape(flat[20:], flat[:20])
    high = seeds_part.set_shape(full[20:], full[:20])
    assert low["lid"] < 4 and high["lid"] > 15, (low, high)
    assert low["relative_contrast"] > high["relative_contrast"]


def test_seeds_part_measures_each_set(tmp_path: Path, eval_settings: Any) -> None:
    ctx = BenchContext(eval_settings, tmp_path / "seeds", quick=True, extras={"dump": DEMO})
    ctx.out_dir.mkdir(parents=True)
    [table] = seeds_part.run(ctx)
    data = json.loads((ctx.out_dir / "seeds.json").read_text())
    assert [r["set"] for r in data["rows"]] == ["real", "noise", "recombined"]
    assert len(table.rows) == 3
    for row in data["rows"]:
        assert row["posts"] == 150 and row["lid"] > 0 and row["relative_contrast"] > 1
        recalls = [row[f"recall_at_10_ef{ef}"] for ef in seeds_part.EF_SEARCH]
        assert all(0 < r <= 1 for r in recalls)
        assert recalls[-1] >= 0.9  # ef 80 over 150 vectors: nearly exact
