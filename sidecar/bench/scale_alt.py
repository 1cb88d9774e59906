"""An HNSW index beside pgvector's, measured on the same vectors and questions (issue 44).

When pgvector's halfvec HNSW cannot reach a latency at a recall, the question is what the
best-kept alternative that installs here would give: USearch (Unum's HNSW library, also the
vector index of DuckDB's and ClickHouse's), holding the same float16 vectors of the public
posts with the same graph degree (``hnsw_m``) and build effort (``hnsw_ef_construction``).

Its leg is timed as a request would run it: the index's ``k`` nearest (one thread, as one
request gets), then the public filter of the sidecar's SQL on a pooled connection for those
ids (a post made private since the index was built is dropped, as the SQL leg drops it). The
index lives in this process: a served version would be a per-node index rebuilt by one command,
as the keyword index is. Recall@10 is against the same exact top 10 as the SQL leg's.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from sidecar.bench.scale_legs import StageRun, private_leaks, timed_calls
from sidecar.db import Database
from sidecar.db.public import public_post_ids

KINDS = ("usearch",)
DEFAULT_EF = (100, 200, 400)  # expansion_search values tried (k = post_k is the floor)


@dataclass
class AltIndex:
    """A built index: the library's object, its build time and its memory."""

    kind: str
    index: Any
    build_s: float
    size_mb: float


def build(kind: str, vectors: npt.NDArray[np.float16], public: npt.NDArray[np.bool_], *,
          m: int, ef_construction: int) -> AltIndex:
    """The public rows of ``vectors`` (row = post id - 1) in a ``kind`` index, built on every
    CPU (the build is an operator's command; search is timed on one thread)."""
    if kind != "usearch":
        raise ValueError(f"unknown alternative index {kind!r}; known: {', '.join(KINDS)}")
    # Late: an optional dependency of the benchmark only (the `dev` extra installs it).
    from usearch.index import Index

    rows = np.flatnonzero(public[: len(vectors)])
    index = Index(ndim=vectors.shape[1], metric="cos", dtype="f16", connectivity=m,
                  expansion_add=ef_construction)
    started = time.perf_counter()
    index.add(rows.astype(np.uint64) + 1, vectors[rows], threads=os.cpu_count() or 1)
    return AltIndex(kind, index, time.perf_counter() - started, index.memory_usage / 2**20)


def run(db: Database, alt: AltIndex, queries: npt.NDArray[np.float32],
        public: npt.NDArray[np.bool_], k: int, ef: int, warm: int) -> StageRun:
    """The alternative leg for each query: ``k`` nearest at ``expansion_search`` = ``ef``,
    then the public filter in PostgreSQL, best first."""
    alt.index.expansion_search = max(ef, k)
    pids: set[int] = set()
    search_ms: list[float] = []

    def call(i: int) -> tuple[list[int], list[float]]:
        started = time.perf_counter()
        found = alt.index.search(queries[i].astype(np.float16), k, threads=1)
        search_ms.append((time.perf_counter() - started) * 1000)
        ids = [int(key) for key in found.keys]
        with db.connection() as conn:
            pids.add(conn.info.backend_pid)
            keep = set(public_post_ids(conn, ids))
        pairs = [(pid, 1.0 - float(d)) for pid, d in zip(ids, found.distances, strict=True)
                 if pid in keep]
        return [p for p, _ in pairs], [s for _, s in pairs]

    ms, out, cpu = timed_calls(call, len(queries), warm, pids)
    found = [ids for ids, _ in out]
    timed = search_ms[-len(queries):]
    return StageRun(ms, found, private_leaks(found, public),
                    extra={"cpu_ms": cpu, "ef_search": max(ef, k),
                           "index_p50_ms": float(np.percentile(timed, 50)),
                           "index_p95_ms": float(np.percentile(timed, 95))},
                    scores=[scores for _, scores in out])
