"""Embedding posts into ai_posts_embeddings: the step shared by the sync backfill and the jobs."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import numpy as np

from models.protocols import Embedder
from sidecar.core.strategy import STRATEGY_VERSIONS, PostSource, digest, prepare_text
from sidecar.db import Database
from sidecar.db.embeddings import (
    EmbeddingRow,
    RegisteredModel,
    stored_digests,
    upsert_embeddings,
)
from sidecar.db.forum_read import post_sources
from sidecar.db.keyword_sql import utc_now
from sidecar.db.pool import DictConn
from sidecar.db.stale import Candidate, mark_checked, stale_candidates

log = logging.getLogger(__name__)

# A check counts from a little before the text was read: a forum transaction that set a post's
# updated_at before our read but committed after it must still look newer than the check.
CHECK_MARGIN = timedelta(seconds=30)


@dataclass
class BatchResult:
    """What happened to one batch of post ids."""

    embedded: int = 0
    unchanged: int = 0  # the digest matched: no model call, no write
    missing: int = 0  # not found or no longer public
    gone_ids: list[int] = field(default_factory=list)  # the missing ones

    def add(self, other: BatchResult) -> None:
        """Accumulate another batch's counts."""
        self.embedded += other.embedded
        self.unchanged += other.unchanged
        self.missing += other.missing
        self.gone_ids += other.gone_ids

    @property
    def total(self) -> int:
        """Posts handled."""
        return self.embedded + self.unchanged + self.missing


@dataclass
class Prepared:
    """The exact texts of the public posts among some ids, their digests and the stored ones."""

    sources: list[PostSource]
    texts: list[str]
    digests: list[str]
    stored: dict[int, str]
    gone_ids: list[int]
    checked_at: datetime  # UTC: when the texts were read, less a margin (see CHECK_MARGIN)

    def changed(self, force: bool = False) -> list[int]:
        """Indexes (into ``sources``) of the posts whose text differs from the stored digest."""
        return [i for i, (s, d) in enumerate(zip(self.sources, self.digests, strict=True))
                if force or self.stored.get(s.post_id) != d]


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

    def prepare(self, post_ids: Sequence[int]) -> Prepared:
        """Build and hash the embedded text of the public posts among ``post_ids``.

        Only digests stored under the current model and strategy versions count: an older
        version's row is re-embedded even when its text is the same.
        """
        with self.db.connection() as conn:
            read_at = utc_now(conn)
            sources = post_sources(conn, post_ids)
            stored = stored_digests(conn, self.model, self.strategy, self.strategy_version,
                                    post_ids)
        found = {s.post_id for s in sources}
        texts = [prepare_text(s, self.strategy, self._truncate) for s in sources]
        return Prepared(sources=sources, texts=texts, digests=[digest(t) for t in texts],
                        stored=stored, gone_ids=sorted(set(post_ids) - found),
                        checked_at=read_at - CHECK_MARGIN)

    def embed_posts(
        self,
        post_ids: Sequence[int],
        *,
        force: bool = False,
        on_write: Callable[[DictConn, BatchResult], None] | None = None,
    ) -> BatchResult:
        """Embed the public posts among ``post_ids`` whose embedded text changed.

        The text is built and hashed first; a post whose digest equals the stored one is only
        marked as checked. Reading, embedding and writing are separate steps so the model call
        holds no database connection. ``on_write`` runs inside the writing transaction, after
        the upserts: what it records commits (or rolls back) together with the vectors.
        """
        result = BatchResult()
        prepared = self.prepare(post_ids)
        sources, texts, digests = prepared.sources, prepared.texts, prepared.digests
        result.gone_ids = prepared.gone_ids
        result.missing = len(prepared.gone_ids)
        todo = prepared.changed(force)
        result.unchanged = len(sources) - len(todo)
        vectors = (self.embedder.embed([texts[i] for i in todo], kind="passage") if todo
                   else np.zeros((0, self.model.dimensions), dtype=np.float32))
        rows = [EmbeddingRow(sources[i].post_id, digests[i], vectors[j])
                for j, i in enumerate(todo)]
        with self.db.connection() as conn:
            result.embedded = upsert_embeddings(
                conn, self.model, self.strategy, self.strategy_version, rows
            )
            mark_checked(conn, self.model, self.strategy, [s.post_id for s in sources],
                         prepared.checked_at)
            if on_write is not None:
                on_write(conn, result)
        return result

    def candidates(self, *, limit: int | None = None, min_chars: int = 1) -> list[Candidate]:
        """Posts needing a look, phase by phase, newest topics first (see ``stale_candidates``)."""
        with self.db.connection() as conn:
            return stale_candidates(conn, self.model, self.strategy, self.strategy_version,
                                    limit=limit, min_chars=min_chars)

    def stale_batches(self, batch_size: int) -> Iterator[list[int]]:
        """Post ids needing work, in backfill order, a batch at a time.

        The list is taken once up front (ids only: a few MB for a million posts), so the posts
        embedded along the way cannot shift the pages.
        """
        ids = [c.post_id for c in self.candidates()]
        for start in range(0, len(ids), batch_size):
            yield ids[start:start + batch_size]

    def count_stale(self) -> int:
        """How many posts the backfill would look at now."""
        return len(self.candidates())

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
