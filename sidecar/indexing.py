"""Embedding posts into ai_posts_embeddings: the step shared by the sync backfill and the jobs."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np

from models.protocols import Embedder
from sidecar.core.strategy import STRATEGY_VERSIONS, digest, prepare_text
from sidecar.db import Database
from sidecar.db.embeddings import (
    EmbeddingRow,
    RegisteredModel,
    mark_checked,
    stale_candidates,
    upsert_embeddings,
)
from sidecar.db.forum_read import post_sources

log = logging.getLogger(__name__)


@dataclass
class BatchResult:
    """What happened to one batch of post ids."""

    embedded: int = 0
    unchanged: int = 0  # the digest matched: no model call, no write
    missing: int = 0  # not found or no longer public

    def add(self, other: BatchResult) -> None:
        """Accumulate another batch's counts."""
        self.embedded += other.embedded
        self.unchanged += other.unchanged
        self.missing += other.missing

    @property
    def total(self) -> int:
        """Posts handled."""
        return self.embedded + self.unchanged + self.missing


class Indexer:
    """Turns post ids into stored vectors for one (model, strategy)."""

    def __init__(
        self, db: Database, embedder: Embedder, model: RegisteredModel, strategy: int = 1
    ) -> None:
        if strategy not in STRATEGY_VERSIONS:
            raise ValueError(f"unknown strategy {strategy}")
        self.db = db
        self.embedder = embedder
        self.model = model
        self.strategy = strategy
        self.strategy_version = STRATEGY_VERSIONS[strategy]

    def _truncate(self, text: str) -> str:
        # Two tokens are kept for the model's special tokens, as discourse-ai does.
        return self.embedder.truncate_text(text, self.embedder.max_length - 2)

    def embed_posts(self, post_ids: Sequence[int], *, force: bool = False) -> BatchResult:
        """Embed the public posts among ``post_ids`` whose embedded text changed.

        The text is built and hashed first; a post whose digest equals the stored one is only
        marked as checked. Reading, embedding and writing are separate steps so the model call
        holds no database connection.
        """
        result = BatchResult()
        with self.db.connection() as conn:
            sources = post_sources(conn, post_ids)
            stored = {
                r["post_id"]: r["digest"]
                for r in conn.execute(
                    "SELECT post_id, digest FROM ai_posts_embeddings WHERE model_id = %s"
                    " AND strategy_id = %s AND model_version >= %s AND strategy_version >= %s"
                    " AND post_id = ANY(%s)",
                    (self.model.id, self.strategy, self.model.version, self.strategy_version,
                     list(post_ids)),
                ).fetchall()
            }
        result.missing = len(set(post_ids)) - len(sources)
        texts = [prepare_text(s, self.strategy, self._truncate) for s in sources]
        digests = [digest(t) for t in texts]
        todo = [i for i, (s, d) in enumerate(zip(sources, digests, strict=True))
                if force or stored.get(s.post_id) != d]
        result.unchanged = len(sources) - len(todo)
        vectors = (self.embedder.embed([texts[i] for i in todo], kind="passage") if todo
                   else np.zeros((0, self.model.dimensions), dtype=np.float32))
        rows = [EmbeddingRow(sources[i].post_id, digests[i], vectors[j])
                for j, i in enumerate(todo)]
        with self.db.connection() as conn:
            result.embedded = upsert_embeddings(
                conn, self.model, self.strategy, self.strategy_version, rows
            )
            mark_checked(conn, self.model, self.strategy, [s.post_id for s in sources])
        return result

    def stale_batches(self, batch_size: int) -> Iterator[list[int]]:
        """Post ids needing work, in id order, a batch at a time (reads ahead one page)."""
        after = 0
        while True:
            with self.db.connection() as conn:
                page = stale_candidates(
                    conn, self.model, self.strategy, self.strategy_version,
                    after_id=after, limit=batch_size,
                )
            if not page:
                return
            ids = [int(r["post_id"]) for r in page]  # type: ignore[call-overload]
            after = ids[-1]
            yield ids

    def count_stale(self) -> int:
        """How many posts the backfill would look at now."""
        total = 0
        with self.db.connection() as conn:
            after = 0
            while True:
                page = stale_candidates(conn, self.model, self.strategy, self.strategy_version,
                                        after_id=after, limit=5000)
                if not page:
                    return total
                total += len(page)
                after = int(page[-1]["post_id"])  # type: ignore[call-overload]

    def backfill(
        self, batch_size: int = 64, on_batch: Callable[[BatchResult], None] | None = None
    ) -> BatchResult:
        """Embed everything stale, in-process (``sidecar backfill --sync``)."""
        total = BatchResult()
        for ids in self.stale_batches(batch_size):
            batch = self.embed_posts(ids)
            total.add(batch)
            if on_batch is not None:
                on_batch(batch)
        return total
