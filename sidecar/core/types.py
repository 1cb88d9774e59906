"""Value types that flow through the retrieval pipeline."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Leg(StrEnum):
    """A retrieval leg: each produces a post-level ranking."""

    SEMANTIC = "semantic"
    KEYWORD = "keyword"


class Mode(StrEnum):
    """Which legs a search uses."""

    HYBRID = "hybrid"
    SEMANTIC = "semantic"
    KEYWORD = "keyword"

    def legs(self) -> tuple[Leg, ...]:
        """The legs this mode runs, in a fixed order."""
        if self is Mode.HYBRID:
            return (Leg.SEMANTIC, Leg.KEYWORD)
        return (Leg(self.value),)


class TopicScore(StrEnum):
    """How a topic's score is derived from its posts' scores."""

    BEST = "best"
    MEAN2 = "mean2"


@dataclass(frozen=True, slots=True)
class PostHit:
    """One post as ranked by one leg (rank is 1-based; score is the leg's own measure)."""

    post_id: int
    topic_id: int
    rank: int
    score: float


@dataclass(frozen=True, slots=True)
class FusedPost:
    """A post after fusion: its fused score and its rank and score in each leg that found it."""

    post_id: int
    topic_id: int
    score: float
    ranks: dict[str, int] = field(default_factory=dict)
    leg_scores: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicHit:
    """One topic after aggregation; ``posts`` are its matching posts, best first.

    ``answers`` are its posts in the post chooser's order (``sidecar.core.postchoice``), the
    first being the one its link points at; empty until the chooser ran.
    """

    topic_id: int
    score: float
    posts: tuple[FusedPost, ...]
    answers: tuple[int, ...] = ()
    link_reason: str = ""
    # The stored similarity of its public post most similar to the question (set with
    # ``answers``; None without a query vector): the bi-encoder's relevance of the topic.
    similarity: float | None = None
    # The stored similarity of each public post the chooser read, (post id, similarity): what
    # the forum's reranker corrects (sidecar.core.rerank_score).
    post_similarity: tuple[tuple[int, float], ...] = ()

    def similarity_of(self, post_id: int) -> float | None:
        """The stored similarity of one of its posts to the question, when the chooser read it."""
        return next((s for pid, s in self.post_similarity if pid == post_id), None)

    @property
    def best(self) -> FusedPost:
        """The topic's best-scored post (what ranked it)."""
        return self.posts[0]

    @property
    def link_id(self) -> int:
        """The post the topic's link points at: the chooser's first, else the best fused."""
        return self.answers[0] if self.answers else self.posts[0].post_id

    def link_order(self) -> list[int]:
        """Post ids to represent the topic, in order: the chooser's, then the fused ones."""
        return list(dict.fromkeys([*self.answers, *(p.post_id for p in self.posts)]))
