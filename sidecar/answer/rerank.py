"""Candidates for the answer and the cross-encoder that reorders them.

Retrieve wide, rerank narrow (design notes 000 and 004): hybrid search finds about three times
the evidence budget, the cross-encoder scores (question, post text) pairs, the best ``limit``
topics are kept. A topic is represented by the post chooser's first two public posts; its score
is the best of theirs, and that post becomes the evidence. Each post is read with its topic's
title (:func:`sidecar.core.rerank_score.rerank_passage`); the forum's own reranker lowers the
post's cosine where it reads no answer (:class:`sidecar.core.rerank_score.Residual`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from models.protocols import Reranker
from sidecar.core.evidence import PostText
from sidecar.core.rerank_score import Residual, rerank_passage
from sidecar.core.types import TopicHit

# Posts of one topic sent to the cross-encoder: the post chooser's first two (the linked post,
# and the next reply that may answer): the cross-encoder decides between them.
POSTS_PER_TOPIC = 2


@dataclass
class Candidate:
    """A topic found by hybrid search, with its posts' texts and relevance scores."""

    topic: TopicHit
    fused_rank: int
    posts: list[PostText]
    scores: list[float | None] = field(default_factory=list)

    @property
    def best_index(self) -> int:
        """Index of the post with the best relevance (the first post when nothing is scored)."""
        scored = [(s, -i) for i, s in enumerate(self.scores) if s is not None]
        return -max(scored)[1] if scored else 0

    @property
    def best_post(self) -> PostText:
        """The post that represents the topic in the evidence."""
        return self.posts[self.best_index]

    @property
    def score(self) -> float | None:
        """The topic's relevance: the best of its posts' scores (None if none was scored)."""
        scored = [s for s in self.scores if s is not None]
        return max(scored) if scored else None


class RerankError(Exception):
    """The cross-encoder gave no usable scores."""


def cross_encode(reranker: Reranker, question: str, candidates: Sequence[Candidate],
                 residual: Residual | None = None) -> int:
    """Score every candidate post against ``question`` in one batch; returns the pair count.

    With ``residual`` (the forum's own reranker), a post's score is its cosine's, lowered by
    the model (:meth:`Residual.score`). Raises :class:`RerankError` (or the model's own error)
    when scores are missing or not finite: the caller then keeps the fused order.
    """
    texts = [rerank_passage(post.title, post.text) for c in candidates for post in c.posts]
    if not texts:
        return 0
    raw = np.asarray(reranker.score(question, texts), dtype=np.float64)
    if raw.ndim == 2:  # (passages, labels): a one-logit model's score is its only column
        raw = raw[:, 0]
    values = [float(v) for v in raw.reshape(-1)]
    if len(values) != len(texts):
        raise RerankError(f"{len(values)} scores for {len(texts)} passages")
    if not all(math.isfinite(v) for v in values):
        raise RerankError("the cross-encoder returned a non-finite score")
    it = iter(values)
    for c in candidates:
        logits = [next(it) for _ in c.posts]
        if residual is not None:
            logits = [residual.score(v, c.topic.similarity_of(p.post_id))
                      for v, p in zip(logits, c.posts, strict=True)]
        c.scores = list(logits)
    return len(texts)


def by_relevance(candidates: Sequence[Candidate]) -> list[Candidate]:
    """Best score first; unscored candidates last; fused rank breaks ties."""
    return sorted(candidates, key=lambda c: (c.score is None, -(c.score or 0.0), c.fused_rank))
