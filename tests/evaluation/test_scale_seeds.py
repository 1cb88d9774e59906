"""Recombined seed posts for a dump too small for the forum the scale benchmark builds."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sidecar.bench import scale_seeds as seeds
from sidecar.bench import scale_vectors as sv
from sidecar.core.strategy import PostSource

DEMO = Path(__file__).resolve().parents[2] / "sidecar" / "demo"


def _source(i: int, text: str) -> PostSource:
    return PostSource(post_id=i, topic_id=i, post_number=1, title=f"title {i}",
                      category="cat", tags=("t",), text=text)


def test_only_a_small_dump_needs_seeds() -> None:
    # The eval forum (15,444 posts) at a million posts: its own vectors (~65 copies each).
    assert seeds.seeds_per_source(15_444, 1_000_000) == 1
    # The demo forum (251 posts) at a million: 40 seeds each, at most 100 copies of any.
    assert seeds.seeds_per_source(251, 1_000_000) == 40
    assert seeds.MAX_COPIES >= 1_000_000 / (251 * 40)
    assert seeds.seeds_per_source(251, 2_000) == 1


def test_siblings_mix_a_post_with_its_nearest() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((12, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    sources = [_source(i, " ".join(f"w{i}x{j}" for j in range(20))) for i in range(12)]
    made = seeds.recombine(sources, vectors, per_source=4, seed=1)
    assert len(made) == 12 * 3
    near = seeds.nearest_rows(vectors)
    low, high = (round(20 * share) for share in seeds.OWN_SHARE)
    for n, sibling in enumerate(made):
        i = n // 3  # source order, three siblings each
        assert (sibling.post_id, sibling.title, sibling.tags) == (i, f"title {i}", ("t",))
        words = sibling.text.split()
        own = [w for w in words if w.startswith(f"w{i}x")]
        assert low <= len(own) <= high  # one window of its own words, first
        first = int(own[0].split("x")[1])
        assert words[:len(own)] == sources[i].text.split()[first:first + len(own)]
        others = {int(w.split("x")[0][1:]) for w in words} - {i}
        assert len(others) == seeds.OTHERS and others <= set(near[i].tolist())
    assert len({s.text for s in made}) == len(made)  # distinct texts, not copies
    assert seeds.recombine(sources, vectors, per_source=1) == []


def test_seed_rows_stay_within_their_source() -> None:
    own = np.arange(6, dtype=np.float32).reshape(3, 2)
    siblings = 10 + np.arange(12, dtype=np.float32).reshape(6, 2)
    table = seeds.interleave(own, siblings, per_source=3)
    assert table.shape == (9, 2)
    np.testing.assert_array_equal(table[::3], own)
    np.testing.assert_array_equal(table[1:3], siblings[0:2])
    rows = seeds.seed_rows(np.array([0, 2, 2, 1] * 50, dtype=np.int64), 3, seed=0)
    assert set((rows // 3).tolist()) == {0, 1, 2}
    np.testing.assert_array_equal(rows // 3, np.array([0, 2, 2, 1] * 50))
    assert len(set(rows.tolist())) == 9  # every seed of a source gets posts
    assert seeds.seed_rows(np.array([4, 5]), 1, seed=0).tolist() == [4, 5]


def test_a_small_dump_gets_real_vectors_of_new_texts(eval_settings: Any) -> None:
    source = sv.embed_source(eval_settings, DEMO, posts=30_000)  # 251 posts: 2 seeds each
    n = len(source.post_ids)
    assert source.per_source == 2 and source.seeds.shape == (2 * n, 384)
    np.testing.assert_array_equal(source.seeds[::2], source.vectors)
    cos = np.sum(source.seeds[::2] * source.seeds[1::2], axis=1)
    assert np.all(cos < 0.9999)  # a new text, not a copy
    assert np.median(cos) > 0.5  # near its source: its words, its nearest posts' words
    cached = list((eval_settings.state_dir / "bench").glob(f"seeds-*-{seeds.recipe()}-2.npy"))
    assert len(cached) == 1
    again = sv.embed_source(eval_settings, DEMO, posts=30_000)
    np.testing.assert_array_equal(again.seeds, source.seeds)
    assert sv.embed_source(eval_settings, DEMO, posts=2_000).per_source == 1
