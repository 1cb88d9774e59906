"""Distinct seed posts for a dump too small for the forum asked of it.

A generated post copies a real post's text and gets that post's vector plus noise
(:mod:`sidecar.bench.scale_vectors`). From the 15,444-post eval forum a million posts are ~65
noisy copies of each real vector; from a dump of 250 posts they would be 4,000. Such a forum is
not what a real forum of that size looks like to an approximate index: thousands of points at
nearly the same distance from every question, a near-tie an exact top 10 cannot be told from.
Measured (``sidecar bench --part seeds``; docs/performance.md, "Forums from a small dump"):
4,000 real posts of the eval forum against 4,000 generated from 250 others, for the eval
questions, means of three draws:

==================  =====  =================  ==========  =====================
set                 LID    relative contrast  NN cosine   HNSW recall@10, ef 10
==================  =====  =================  ==========  =====================
real posts          16.7   1.59               0.80        0.944
noisy copies        54.7   1.22               0.44        0.839
recombined (this)   35.9   1.34               0.81        0.881
==================  =====  =================  ==========  =====================

So when the dump has fewer posts than the forum needs, each of its posts first gets
recombined siblings: the same title, category and tags, a window of its own text (a fifth to
three fifths of it) and a window (a fifth to a half) of the text of each of two of its ten
nearest posts. The model embeds these texts, so they are real vectors of distinct texts, and the
generated posts copy them (plus the same noise) instead of the few real ones: nearer a real
forum than noisy copies on every measure, and still harder than one, never easier.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

import numpy as np
import numpy.typing as npt

from sidecar.core.strategy import PostSource

# Most copies of one vector in a generated forum: the eval forum gives ~65 at a million posts,
# where the index was measured against exact search (docs/performance.md).
MAX_COPIES = 100
NEIGHBOURS = 10
# The recipe, chosen among four on the eval forum (``sidecar bench --part seeds``) as the one
# whose generated posts are as far apart as real ones (median nearest-neighbour cosine 0.83
# against 0.80 real; 0.93 with half to all of a post's own words and one neighbour's).
OWN_SHARE = (0.2, 0.6)  # share of the post's own words kept, one window
OTHER_SHARE = (0.2, 0.5)  # share of each neighbour's words added, one window each
OTHERS = 2  # neighbours (of its ten nearest) whose words are added


def recipe() -> str:
    """A name for the recipe, for caches of embedded siblings."""
    return f"r{OWN_SHARE[0]}-{OWN_SHARE[1]}-{OTHER_SHARE[0]}-{OTHER_SHARE[1]}-{OTHERS}"


def seeds_per_source(sources: int, posts: int) -> int:
    """Vectors each source post needs so that none is copied more than ``MAX_COPIES`` times
    (1: its own vector is enough)."""
    return max(1, math.ceil(posts / (MAX_COPIES * max(1, sources))))


def _window(words: list[str], share: tuple[float, float], rng: np.random.Generator
            ) -> list[str]:
    """One contiguous run of ``share`` of the words (at least one)."""
    if not words:
        return []
    k = max(1, round(len(words) * rng.uniform(*share)))
    start = int(rng.integers(0, len(words) - k + 1))
    return words[start:start + k]


def nearest_rows(vectors: npt.NDArray[np.float32], k: int = NEIGHBOURS
                 ) -> npt.NDArray[np.int64]:
    """The ``k`` nearest other rows of each row by cosine (unit vectors)."""
    sims = vectors @ vectors.T
    np.fill_diagonal(sims, -np.inf)
    k = min(k, len(vectors) - 1)
    return np.argsort(-sims, axis=1)[:, :k].astype(np.int64)


def recombine(sources: Sequence[PostSource], vectors: npt.NDArray[np.float32],
              per_source: int, seed: int = 0) -> list[PostSource]:
    """``per_source - 1`` siblings of each source post, in source order (its own vector is
    the first of its seeds). ``vectors[i]`` is the vector of ``sources[i]``."""
    if per_source <= 1 or len(sources) < 2:
        return []
    rng = np.random.default_rng(seed)
    near = nearest_rows(vectors)
    words = [s.text.split() for s in sources]
    out: list[PostSource] = []
    for i, source in enumerate(sources):
        for _ in range(per_source - 1):
            text = _window(words[i], OWN_SHARE, rng)
            for other in rng.choice(near[i], size=min(OTHERS, near.shape[1]), replace=False):
                text += _window(words[int(other)], OTHER_SHARE, rng)
            out.append(replace(source, text=" ".join(text)))
    return out


def interleave(vectors: npt.NDArray[np.float32], siblings: npt.NDArray[np.float32],
               per_source: int) -> npt.NDArray[np.float32]:
    """Seeds in source order: row ``i * per_source`` is source ``i``'s own vector, the next
    ``per_source - 1`` rows its siblings'."""
    if per_source <= 1:
        return vectors
    n, dims = vectors.shape
    out = np.empty((n, per_source, dims), dtype=np.float32)
    out[:, 0] = vectors
    out[:, 1:] = siblings.reshape(n, per_source - 1, dims)
    return out.reshape(n * per_source, dims)


def seed_rows(source_rows: npt.NDArray[np.int64], per_source: int, seed: int
              ) -> npt.NDArray[np.int64]:
    """For each generated post (given its source's row), the row of one of its seeds."""
    if per_source <= 1:
        return source_rows
    rng = np.random.default_rng(seed)
    return source_rows * per_source + rng.integers(0, per_source, len(source_rows))
