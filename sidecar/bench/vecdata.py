"""Synthetic embedding-like vectors for the vector-search benchmark (numpy only, no I/O).

Uniform random vectors in high dimension are all nearly orthogonal: every point is about as far
from every other, which makes approximate search look either trivially hard or meaningless. Real
text embeddings are clustered at several scales and share a common direction (unrelated texts
still have a cosine of 0.1-0.2). The generator mixes those parts, as a mixture of Gaussians on
the unit sphere:

    v = a·g + b·topic + c·subtopic + e·noise, then normalized

with g shared by all vectors, ~n/300 topics of unequal sizes, ~10 vectors per subtopic. Expected
cosines: same subtopic ≈ 0.7, same topic ≈ 0.4, unrelated ≈ 0.1.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

# Squared weights of the components (they sum to 1).
SHARE_GLOBAL, SHARE_TOPIC, SHARE_SUBTOPIC, SHARE_NOISE = 0.10, 0.30, 0.30, 0.30
PER_TOPIC = 300
PER_SUBTOPIC = 10

COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + struct.pack(">ii", 0, 0)
COPY_TRAILER = struct.pack(">h", -1)


def _unit(rng: np.random.Generator, n: int, dims: int) -> npt.NDArray[np.float32]:
    x = rng.standard_normal((n, dims), dtype=np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x


@dataclass
class ClusteredSphere:
    """A fixed random mixture; draw as many vectors from it as needed, reproducibly."""

    dims: int
    n_hint: int
    seed: int = 0

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        self.n_topics = max(1, self.n_hint // PER_TOPIC)
        self.n_subtopics = max(self.n_topics, self.n_hint // PER_SUBTOPIC)
        self.g = _unit(rng, 1, self.dims)[0]
        self.topics = _unit(rng, self.n_topics, self.dims)
        self.subtopics = _unit(rng, self.n_subtopics, self.dims)
        # Topics of unequal size (lognormal popularity), each subtopic inside one topic.
        self.sub_topic = rng.integers(0, self.n_topics, self.n_subtopics)
        weight = rng.lognormal(0.0, 1.0, self.n_subtopics)
        self.sub_p = weight / weight.sum()

    def sample(self, n: int, seed: int) -> npt.NDArray[np.float16]:
        """``n`` unit vectors as float16 (what a halfvec column stores)."""
        rng = np.random.default_rng((self.seed, seed))
        sub = rng.choice(self.n_subtopics, size=n, p=self.sub_p)
        v = (np.sqrt(SHARE_GLOBAL) * self.g
             + np.sqrt(SHARE_TOPIC) * self.topics[self.sub_topic[sub]]
             + np.sqrt(SHARE_SUBTOPIC) * self.subtopics[sub]
             + np.sqrt(SHARE_NOISE) * _unit(rng, n, self.dims))
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        return v.astype(np.float16)

    def chunks(self, n: int, chunk: int = 20_000) -> Iterator[tuple[int, npt.NDArray[np.float16]]]:
        """(first id, vectors) blocks adding up to ``n`` vectors, ids from 1."""
        for i, start in enumerate(range(0, n, chunk)):
            yield start + 1, self.sample(min(chunk, n - start), seed=i)


def exact_top_k(
    data: npt.NDArray[np.float16], queries: npt.NDArray[np.float16], k: int,
    block: int = 50_000,
) -> npt.NDArray[np.int64]:
    """Ids (1-based row numbers) of the ``k`` nearest rows by cosine, best first, per query.

    Computed on the float16 values the database stores, in float32, block by block.
    """
    return exact_scan(data, queries, k, block=block)[0]


def exact_scan(
    data: npt.NDArray[np.float16], queries: npt.NDArray[Any], k: int, *,
    allowed: npt.NDArray[np.bool_] | None = None, block: int = 50_000,
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float32]]:
    """Ids (1-based row numbers) and cosines of the ``k`` nearest rows, best first, per query,
    among the rows ``allowed`` marks (all when None): an exact scan, block by block."""
    q = queries.astype(np.float32)
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    best_sim = np.full((len(q), 0), -np.inf, dtype=np.float32)
    best_id = np.zeros((len(q), 0), dtype=np.int64)
    for start in range(0, len(data), block):
        x = data[start:start + block].astype(np.float32)
        x /= np.linalg.norm(x, axis=1, keepdims=True)
        sims = q @ x.T
        if allowed is not None:
            sims[:, ~allowed[start:start + block]] = -np.inf
        take = min(k, sims.shape[1])
        part = np.argpartition(-sims, take - 1, axis=1)[:, :take]
        best_sim = np.concatenate([best_sim, np.take_along_axis(sims, part, axis=1)], axis=1)
        best_id = np.concatenate([best_id, part + start + 1], axis=1)
        keep = np.argsort(-best_sim, axis=1, kind="stable")[:, :k]
        best_sim = np.take_along_axis(best_sim, keep, axis=1)
        best_id = np.take_along_axis(best_id, keep, axis=1)
    return best_id, best_sim


def recall_at_k(found: list[list[int]], truth: npt.NDArray[np.int64], k: int) -> float:
    """Mean share of the true ``k`` nearest ids found in each result's first ``k``."""
    if not found:
        return 0.0
    hits = [len(set(f[:k]) & set(t[:k].tolist())) / k for f, t in zip(found, truth, strict=True)]
    return float(np.mean(hits))


def copy_binary_rows(first_id: int, vectors: npt.NDArray[np.float16]) -> bytes:
    """Rows ``(id int4, embedding halfvec)`` in PostgreSQL's binary COPY format (no header).

    Built as one numpy record array: ~100x faster than encoding row by row in Python.
    """
    n, dims = vectors.shape
    dtype = np.dtype([("fields", ">i2"), ("id_len", ">i4"), ("id", ">i4"), ("vec_len", ">i4"),
                      ("dim", ">u2"), ("unused", ">u2"), ("vec", ">f2", (dims,))])
    rows = np.empty(n, dtype=dtype)
    rows["fields"] = 2
    rows["id_len"] = 4
    rows["id"] = np.arange(first_id, first_id + n, dtype=np.int32)
    rows["vec_len"] = 4 + 2 * dims  # halfvec: int16 dim, int16 unused, then the halves
    rows["dim"] = dims
    rows["unused"] = 0
    rows["vec"] = vectors
    return rows.tobytes()
