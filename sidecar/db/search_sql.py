"""The semantic leg, as SQL, with the public filter applied inside the query.

The keyword leg has its own index: see :mod:`sidecar.keyword`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pgvector import HalfVector
from psycopg import sql

from sidecar.core.types import PostHit
from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE
from sidecar.db.vector_share import scaled_ef_search

# The largest hnsw.ef_search pgvector accepts.
EF_SEARCH_MAX = 1000


def _set_local(conn: DictConn, values: dict[str, str]) -> None:
    # set_config(..., true) is SET LOCAL: it ends with the transaction, never leaks to the pool.
    # One statement for all of them: each round trip costs a wake-up of both processes.
    calls = sql.SQL(", ").join(sql.SQL("set_config({}, {}, true)").format(
        sql.Literal(name), sql.Literal(value)) for name, value in values.items())
    conn.execute(sql.SQL("SELECT ") + calls)


def semantic_leg(
    conn: DictConn,
    *,
    model_id: int,
    strategy_id: int,
    dimensions: int,
    vector: np.ndarray,
    k: int,
    ef_search_min: int = 40,
    iterative_scan: bool = True,
    binary: bool = False,
    binary_overfetch: int = 4,
    scan_order: str = "strict_order",
    max_scan_tuples: int | None = None,
    public_share: float = 1.0,
    exclude_topics: Sequence[int] = (),
) -> list[PostHit]:
    """Nearest public posts by cosine distance on the (model, strategy) partial HNSW index.

    With ``iterative_scan`` (pgvector >= 0.8) and a ``scan_order`` (pgvector's
    ``hnsw.iterative_scan``: ``strict_order`` or ``relaxed_order``) the HNSW scan keeps going
    when the public filter discards candidates, or once its first ``hnsw.ef_search`` candidates
    are used up, until the ``LIMIT`` is met or ``max_scan_tuples`` tuples were visited: filtering
    never leaves the page short, and ``ef_search_min`` alone sets how good the first results
    are (docs/performance.md, "Search at forum scale"). Without iterative scans
    ``hnsw.ef_search`` caps how many rows one scan returns, so it is raised to the rows asked.
    A relaxed scan may return rows slightly out of order: they are sorted again after the scan.
    With ``binary`` the bit-quantized index finds ``k * binary_overfetch`` candidates that are
    then re-ranked exactly on the halfvec (discourse-ai's scheme).
    ``public_share`` is the index's share of public vectors (:mod:`sidecar.db.vector_share`):
    ``ef_search_min`` is divided by it, so that as many public candidates are examined when
    the index also holds vectors the filter drops. Posts of ``exclude_topics`` are filtered
    out like private ones.
    """
    fetch = k * binary_overfetch if binary else k
    iterative = iterative_scan and scan_order != "off"
    # pgvector refuses ef_search above 1000; beyond that the iterative scan supplies the rest.
    ef_public = scaled_ef_search(ef_search_min, public_share, EF_SEARCH_MAX)
    ef_search = ef_public if iterative else max(ef_public, fetch)
    knobs = {"hnsw.ef_search": str(min(EF_SEARCH_MAX, ef_search))}
    if iterative:
        knobs["hnsw.iterative_scan"] = scan_order
        if max_scan_tuples is not None:
            knobs["hnsw.max_scan_tuples"] = str(max_scan_tuples)
    _set_local(conn, knobs)
    # Model and strategy ids are inlined as literals so the planner can match the partial index.
    params = {
        "mid": sql.Literal(model_id),
        "sid": sql.Literal(strategy_id),
        "dims": sql.Literal(dimensions),
        "joins": sql.SQL(PUBLIC_JOINS),
        "public": sql.SQL(PUBLIC_WHERE),
    }
    if binary:
        query = sql.SQL(
            """
            WITH candidates AS MATERIALIZED (
                SELECT e.post_id, p.topic_id, e.embeddings::halfvec({dims}) AS emb
                FROM ai_posts_embeddings e
                JOIN posts p ON p.id = e.post_id {joins}
                WHERE e.model_id = {mid} AND e.strategy_id = {sid} AND {public}
                  AND p.topic_id <> ALL(%(exclude)s::int[])
                ORDER BY binary_quantize(e.embeddings)::bit({dims})
                         <~> binary_quantize(%(q)s::halfvec({dims}))::bit({dims})
                LIMIT %(fetch)s
            )
            SELECT post_id, topic_id, 1 - (emb <=> %(q)s::halfvec({dims})) AS similarity
            FROM candidates ORDER BY emb <=> %(q)s::halfvec({dims}), post_id LIMIT %(k)s
            """
        ).format(**params)
    else:
        # MATERIALIZED: the scan runs as written (index order, LIMIT), then its rows are sorted.
        query = sql.SQL(
            """
            WITH found AS MATERIALIZED (
                SELECT e.post_id, p.topic_id,
                       e.embeddings::halfvec({dims}) <=> %(q)s::halfvec({dims}) AS distance
                FROM ai_posts_embeddings e
                JOIN posts p ON p.id = e.post_id {joins}
                WHERE e.model_id = {mid} AND e.strategy_id = {sid} AND {public}
                  AND p.topic_id <> ALL(%(exclude)s::int[])
                ORDER BY e.embeddings::halfvec({dims}) <=> %(q)s::halfvec({dims})
                LIMIT %(k)s
            )
            SELECT post_id, topic_id, 1 - distance AS similarity
            FROM found ORDER BY distance, post_id
            """
        ).format(**params)
    rows = conn.execute(
        query, {"q": HalfVector(vector.astype(np.float32)), "k": k, "fetch": fetch,
                "exclude": list(exclude_topics)}
    ).fetchall()
    return [
        PostHit(post_id=r["post_id"], topic_id=r["topic_id"], rank=i, score=float(r["similarity"]))
        for i, r in enumerate(rows, start=1)
    ]
