"""Vectors for a million posts without embedding a million texts.

The dump is embedded once, by the sidecar's own evaluation state (import and backfill with the
configured model, kept under ``<state_dir>/eval/`` and reused by every later run), and so are the
queries. A generated post reuses the real vector of the post whose text it copies, plus
Gaussian noise: a copy is as close to its source as the dump's posts are to their nearest
neighbour (median cosine), so that a forum of many copies is not a forum of exact duplicates.
Another size (1,024: bge-m3's) is a fixed random projection of the real vectors into that many
dimensions, with orthonormal columns (cosines between real vectors are kept exactly), the noise
then drawn in all the dimensions.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import psycopg
from psycopg import sql

from sidecar.bench import scale_seeds as seeds
from sidecar.bench import vecdata
from sidecar.bench.scale_forum import COPY_HEADER, COPY_TRAILER
from sidecar.config.settings import Settings
from sidecar.core.strategy import strategy_text
from sidecar.db.embeddings import RegisteredModel, stored_vectors
from sidecar.db.forum_read import post_sources

# Deferred imports (heavy dependency): the evaluation state (embedded servers, the model) loads
# only when the dump's vectors are not cached yet.

if TYPE_CHECKING:
    from sidecar.runtime.resources import Resources

log = logging.getLogger(__name__)
F32 = npt.NDArray[np.float32]
F16 = npt.NDArray[np.float16]
NN_SAMPLE = 2000  # posts whose nearest neighbour sets the noise
BLOCK = 50_000
PROJECTION_SEED = 1024
# ai_posts_embeddings.created_at/updated_at in binary COPY: microseconds since 2000-01-01.
STAMP = (25 * 365 + 6) * 86_400 * 1_000_000  # 2025-01-01
DIGEST = b"bench"


@dataclass(frozen=True)
class SourceVectors:
    """The dump's post vectors (model order: post ids ascending) and its queries'.

    ``seeds``: the vectors generated posts copy, ``per_source`` rows per source post in source
    order (its own vector first, then its recombined siblings': :mod:`scale_seeds`); the same
    as ``vectors`` when the dump is large enough.
    """

    model: str
    post_ids: npt.NDArray[np.int64]
    vectors: F32
    query_ids: list[str]
    query_texts: list[str]
    query_vectors: F32
    seeds: F32
    per_source: int = 1

    def rows_of(self, post_ids: list[int]) -> npt.NDArray[np.int64]:
        """Row in ``vectors`` of each post id (every id must have one)."""
        where = np.searchsorted(self.post_ids, post_ids)
        return where.astype(np.int64)


def embed_source(settings: Settings, dump: Path, posts: int) -> SourceVectors:
    """Embed the dump's posts (once: the evaluation state keeps them), its queries, and the
    recombined siblings a forum of ``posts`` posts needs (once: cached in the state dir)."""
    from sidecar.evaluation.dataset import forum_digest, load_dataset
    from sidecar.evaluation.state import prepare_state

    dataset = load_dataset(dump)
    state = prepare_state(settings, dump, progress=False)
    try:
        res = state.resources
        ids, vectors, texts, queries = dump_vectors(res, [q.text for q in dataset.queries])
        per_source = seeds.seeds_per_source(len(ids), posts)
        siblings = np.zeros((0, vectors.shape[1]), dtype=np.float32)
        if per_source > 1:
            cache = settings.state_dir / "bench" / (
                f"seeds-{forum_digest(dump)[:16]}-{res.model.name}-{seeds.recipe()}-{per_source}.npy")
            if cache.exists():
                siblings = np.load(cache)
            else:
                siblings = embed_siblings(res, ids, vectors, per_source)
                cache.parent.mkdir(parents=True, exist_ok=True)
                np.save(cache, siblings)
        return SourceVectors(model=res.model.name, post_ids=ids, vectors=vectors,
                             query_ids=[q.id for q in dataset.queries], query_texts=texts,
                             query_vectors=queries,
                             seeds=seeds.interleave(vectors, siblings, per_source),
                             per_source=per_source)
    finally:
        state.close()


def dump_vectors(res: Resources, questions: list[str]
                 ) -> tuple[npt.NDArray[np.int64], F32, list[str], F32]:
    """The embedded dump's post ids and unit vectors (post ids ascending), its questions as
    `sidecar eval` sends them (one line, cut to what /v1/search accepts) and their unit
    vectors."""
    with res.db.connection() as conn:
        stored = stored_vectors(conn, res.model)
    ids = np.array([post_id for post_id, _ in stored], dtype=np.int64)
    vectors = _unit(np.stack([v for _, v in stored]).astype(np.float32))
    texts = [" ".join(q.split())[:res.settings.max_query_chars] for q in questions]
    queries = _unit(res.embedder.embed(texts, kind="query").astype(np.float32))
    return ids, vectors, texts, queries


def embed_siblings(res: Resources, post_ids: npt.NDArray[np.int64], vectors: F32,
                   per_source: int, seed: int = 0) -> F32:
    """The model's vectors of ``per_source - 1`` recombined siblings of each post
    (:func:`scale_seeds.recombine`; ``vectors[i]`` is post ``post_ids[i]``'s own)."""
    with res.db.connection() as conn:
        sources = post_sources(conn, post_ids.tolist())
    if [s.post_id for s in sources] != post_ids.tolist():
        raise RuntimeError("the dump's embedded posts and its public posts differ")
    made = seeds.recombine(sources, vectors, per_source, seed)
    log.info("embedding %d recombined siblings of %d posts", len(made), len(sources))
    return _unit(res.embedder.embed([strategy_text(s, 1) for s in made],
                                    kind="passage").astype(np.float32))


def _unit(x: F32) -> F32:
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def nearest_cosine(vectors: F32, sample: int = NN_SAMPLE, seed: int = 0) -> float:
    """Median cosine between a post and its nearest other post, over a sample."""
    rng = np.random.default_rng(seed)
    rows = rng.choice(len(vectors), size=min(sample, len(vectors)), replace=False)
    sims = vectors[rows] @ vectors.T
    sims[np.arange(len(rows)), rows] = -np.inf
    return float(np.median(sims.max(axis=1)))


def noise_sigma(cosine: float) -> float:
    """Norm of the noise that leaves a unit vector at ``cosine`` of where it was.

    ``cos(x, x + n) ≈ 1 / sqrt(1 + |n|²)`` for a random ``n`` in many dimensions.
    """
    return float(np.sqrt(1.0 / cosine**2 - 1.0))


def projection(source_dims: int, dims: int) -> F32 | None:
    """A fixed ``dims x source_dims`` map with orthonormal columns (None: same size)."""
    if dims == source_dims:
        return None
    if dims < source_dims:
        raise ValueError(f"cannot project {source_dims}-dimension vectors into {dims}")
    rng = np.random.default_rng(PROJECTION_SEED)
    q, _ = np.linalg.qr(rng.standard_normal((dims, source_dims)))
    return q.astype(np.float32)


def to_dims(vectors: F32, dims: int) -> F32:
    """Real vectors in ``dims`` dimensions (projected when larger)."""
    proj = projection(vectors.shape[1], dims)
    return vectors if proj is None else _unit(vectors @ proj.T)


def post_vectors(base: F32, rows: npt.NDArray[np.int64], dims: int, sigma: float,
                 seed: int) -> Iterator[tuple[int, F16]]:
    """(first post id, float16 vectors) blocks: the base row of each post, plus noise."""
    proj = projection(base.shape[1], dims)
    rng = np.random.default_rng((seed, dims))
    for start in range(0, len(rows), BLOCK):
        block = base[rows[start:start + BLOCK]]
        if proj is not None:
            block = block @ proj.T
        noise = rng.standard_normal(block.shape, dtype=np.float32) * (sigma / np.sqrt(dims))
        yield start + 1, _unit(block + noise).astype(np.float16)


def embedding_rows(post_ids: npt.NDArray[np.int64], model: RegisteredModel, vectors: F16
                   ) -> bytes:
    """Rows of ai_posts_embeddings (strategy 1) in binary COPY format, as one record array."""
    n, dims = vectors.shape
    fields: list[tuple[str, Any, Any]] = [
        ("post_id", ">i8", 8), ("model_id", ">i8", 8), ("model_version", ">i4", 4),
        ("strategy_id", ">i4", 4), ("strategy_version", ">i4", 4),
        ("digest", f"S{len(DIGEST)}", len(DIGEST)), ("embeddings", None, 4 + 2 * dims),
        ("created_at", ">i8", 8), ("updated_at", ">i8", 8)]
    layout: list[tuple[Any, ...]] = [("count", ">i2")]
    for name, kind, _ in fields:
        layout.append((f"{name}_len", ">i4"))
        layout += ([("dim", ">u2"), ("unused", ">u2"), ("vec", ">f2", (dims,))]
                   if kind is None else [(name, kind)])
    rows = np.empty(n, dtype=np.dtype(layout))
    rows["count"] = len(fields)
    for name, _, size in fields:
        rows[f"{name}_len"] = size
    rows["post_id"] = post_ids
    rows["model_id"] = model.id
    rows["model_version"] = model.version
    rows["strategy_id"] = rows["strategy_version"] = 1
    rows["digest"] = DIGEST
    rows["dim"], rows["unused"], rows["vec"] = dims, 0, vectors
    rows["created_at"] = rows["updated_at"] = STAMP
    return rows.tobytes()


def load_vectors(conn: psycopg.Connection[Any], model: RegisteredModel,
                 blocks: Iterator[tuple[int, F16]],
                 only: npt.NDArray[np.bool_] | None = None) -> F16:
    """COPY every block into ai_posts_embeddings (only the posts ``only`` marks, when given:
    the sidecar's backfill stores public posts only); returns all the vectors generated
    (row = post id - 1)."""
    kept: list[F16] = []
    columns = sql.SQL("post_id, model_id, model_version, strategy_id, strategy_version, digest,"
                      " embeddings, created_at, updated_at")
    with conn.cursor().copy(sql.SQL("COPY ai_posts_embeddings ({}) FROM STDIN (FORMAT BINARY)"
                                    ).format(columns)) as copy:
        copy.write(COPY_HEADER)
        for first, block in blocks:
            ids = np.arange(first, first + len(block), dtype=np.int64)
            keep = slice(None) if only is None else only[first - 1:first - 1 + len(block)]
            copy.write(embedding_rows(ids[keep], model, block[keep]))
            kept.append(block)
        copy.write(COPY_TRAILER)
    return np.concatenate(kept)


def exact_public_top_k(data: F16, public: npt.NDArray[np.bool_], queries: F32, k: int
                       ) -> tuple[npt.NDArray[np.int64], F32]:
    """Post ids (row + 1) and cosines of the ``k`` nearest public posts per query, best first,
    computed on the stored float16 values (an exact scan)."""
    return vecdata.exact_scan(data, queries, k, allowed=public, block=BLOCK)

