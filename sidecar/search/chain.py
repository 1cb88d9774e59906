"""The rerank chain's adapter: loads what the enabled stages need, then runs the pure chain.

One query for the best posts' vectors of the ``mmr_pool`` first topics (only when MMR is on),
then MMR; one query for the features of the topics that can still reach the page (only when
boosts are on), then the boosts: the stages of :func:`sidecar.core.chain.apply_chain`, in its
order.
``SearchService.find_topics`` calls it after aggregation, and ``make bench`` (part ``chain``)
times exactly this call.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from sidecar.core.chain import (
    MAX_CANDIDATES,
    ChainFlags,
    TopicFeatures,
    Vector,
    apply_chain,
    boost_window,
)
from sidecar.core.types import TopicHit
from sidecar.db import Database
from sidecar.db.chain_read import FeatureReader, post_vectors
from sidecar.db.embeddings import RegisteredModel
from sidecar.db.pool import DictConn


class RerankChain:
    """Shared by every request of a process (the schema detection is cached inside)."""

    def __init__(self, db: Database, model: RegisteredModel) -> None:
        self.db = db
        self.model = model
        self.reader = FeatureReader()

    def features(self, conn: DictConn, topics: Sequence[TopicHit]) -> dict[int, TopicFeatures]:
        """Features of the topics (keyed by topic id), read for their best posts."""
        return self.reader.features(conn, [(t.topic_id, t.best.post_id) for t in topics])

    def vectors(self, conn: DictConn, topics: Sequence[TopicHit], strategy: int
                ) -> dict[int, Vector]:
        """Stored vectors of the topics' best posts (keyed by post id)."""
        return dict(post_vectors(conn, model_id=self.model.id, strategy_id=strategy,
                                 dimensions=self.model.dimensions,
                                 post_ids=[t.best.post_id for t in topics]))

    def load(
        self, topics: Sequence[TopicHit], flags: ChainFlags, strategy: int
    ) -> tuple[dict[int, TopicFeatures], dict[int, Vector]]:
        """Everything the enabled stages could read, for every candidate: what a caller that
        runs :func:`apply_chain` itself with many flags (the tuner) caches once per query."""
        head = topics[:MAX_CANDIDATES]
        with self.db.connection() as conn:
            features = self.features(conn, head) if flags.boosts else {}
            vectors = self.vectors(conn, head[:flags.mmr_pool], strategy) if flags.mmr else {}
        return features, vectors

    def run(
        self, topics: Sequence[TopicHit], flags: ChainFlags, query_vector: Vector | None,
        strategy: int, now: datetime | None = None, *, needed: int | None = None,
    ) -> tuple[list[TopicHit], dict[str, Any]]:
        """The reordered topics and a trace detail (stages, counts, where the time went).

        MMR first, on the vectors of its pool; then the boosts, reading the features of only
        the topics that can reach the first ``needed`` (all candidates when None): beyond them
        the order is the MMR's, which a caller keeping ``needed`` topics never sees.
        """
        now = now or datetime.now(UTC)
        order = list(topics)
        detail: dict[str, Any] = {}
        stages_ms = 0.0
        if flags.mmr:
            started = time.perf_counter()
            with self.db.connection() as conn:
                vectors = self.vectors(conn, order[:flags.mmr_pool], strategy)
            detail.update(vectors=len(vectors), vectors_ms=_ms(started))
            started = time.perf_counter()
            order = apply_chain(order, replace(flags, boosts=False), {}, vectors, query_vector,
                                now)
            stages_ms += _ms(started)
        if flags.boosts:
            window = boost_window(order, flags.boost_positions, needed)
            started = time.perf_counter()
            with self.db.connection() as conn:
                features = self.features(conn, order[:window])
                sources = self.reader.schema(conn).sources()
            detail.update(features=len(features), sources=sources, features_ms=_ms(started))
            started = time.perf_counter()
            order = apply_chain(order, replace(flags, mmr=False), features, {}, query_vector,
                                now)
            stages_ms += _ms(started)
        head = min(len(topics), MAX_CANDIDATES)
        moved = sum(1 for a, b in zip(topics[:head], order[:head], strict=True)
                    if a.topic_id != b.topic_id)
        return order, {"stages": [s for s in flags.stages() if s != "knee"],
                       "candidates": head, "moved": moved, **detail,
                       "stages_ms": round(stages_ms, 3)}


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000.0, 3)
