"""The rerank chain's adapter: loads what the enabled stages need, then runs the pure chain.

One query for the topic features (only when boosts are on) of the
:data:`~sidecar.core.chain.MAX_CANDIDATES` first topics, one for the best posts' vectors (only
when MMR is on) of the ``mmr_pool`` first; then :func:`sidecar.core.chain.apply_chain`.
``SearchService.find_topics`` calls it after aggregation, and ``make bench`` (part ``chain``)
times exactly this call.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sidecar.core.chain import MAX_CANDIDATES, ChainFlags, TopicFeatures, Vector, apply_chain
from sidecar.core.types import TopicHit
from sidecar.db import Database
from sidecar.db.chain_read import FeatureReader, post_vectors
from sidecar.db.embeddings import RegisteredModel


class RerankChain:
    """Shared by every request of a process (the schema detection is cached inside)."""

    def __init__(self, db: Database, model: RegisteredModel) -> None:
        self.db = db
        self.model = model
        self.reader = FeatureReader()

    def load(
        self, topics: Sequence[TopicHit], flags: ChainFlags, strategy: int
    ) -> tuple[dict[int, TopicFeatures], dict[int, Vector], dict[str, Any]]:
        """Features and vectors of the candidates that the enabled stages need."""
        head = topics[:MAX_CANDIDATES]
        features: dict[int, TopicFeatures] = {}
        vectors: dict[int, Vector] = {}
        detail: dict[str, Any] = {}
        with self.db.connection() as conn:
            if flags.boosts:
                started = time.perf_counter()
                features = self.reader.features(
                    conn, [(t.topic_id, t.best.post_id) for t in head])
                detail.update(features=len(features), sources=self.reader.schema(conn).sources(),
                              features_ms=_ms(started))
            if flags.mmr:
                started = time.perf_counter()
                vectors = dict(post_vectors(
                    conn, model_id=self.model.id, strategy_id=strategy,
                    dimensions=self.model.dimensions,
                    post_ids=[t.best.post_id for t in head[:flags.mmr_pool]]))
                detail.update(vectors=len(vectors), vectors_ms=_ms(started))
        return features, vectors, detail

    def run(
        self, topics: Sequence[TopicHit], flags: ChainFlags, query_vector: Vector | None,
        strategy: int, now: datetime | None = None,
    ) -> tuple[list[TopicHit], dict[str, Any]]:
        """The reordered topics and a trace detail (stages, counts, where the time went)."""
        features, vectors, detail = self.load(topics, flags, strategy)
        started = time.perf_counter()
        reordered = apply_chain(topics, flags, features, vectors, query_vector,
                                now or datetime.now(UTC))
        detail["stages_ms"] = _ms(started)
        head = min(len(topics), MAX_CANDIDATES)
        moved = sum(1 for a, b in zip(topics[:head], reordered[:head], strict=True)
                    if a.topic_id != b.topic_id)
        return reordered, {"stages": [s for s in flags.stages() if s != "knee"],
                           "candidates": head, "moved": moved, **detail}


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)
