"""Stages after `find_topics` (reranking, and any later one), as the evaluation plugs them in.

A stage takes the query and the first-stage topics (best first) and returns them reordered. The
configuration matrix names stages; each name maps to a factory that builds the stage from the
evaluation's resources, or returns None when the stage cannot run here (no cross-encoder
configured), in which case the configurations that need it are left out and the report says so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Protocol

from sidecar.answer.pipeline import load_candidates
from sidecar.answer.rerank import by_relevance, cross_encode
from sidecar.core.types import TopicHit
from sidecar.runtime.resources import Resources


class TopicStage(Protocol):
    """One post-retrieval stage."""

    @property
    def name(self) -> str:
        """Short name, shown in the report."""
        ...

    @property
    def candidates(self) -> int:
        """How many first-stage topics the stage wants to see."""
        ...

    def apply(self, query: str, topics: Sequence[TopicHit]) -> list[TopicHit]:
        """The topics in the stage's order."""
        ...


class CrossEncoderRerank:
    """The answer pipeline's rerank (``sidecar.answer.rerank``) applied to search candidates.

    As ``POST /v1/retrieve`` does: each of the first ``candidates`` topics is represented by the
    post chooser's first two public posts, the cross-encoder scores (query, post text) pairs in
    one batch, a topic scores its best post's score and that post becomes the one it links to.
    Topics beyond ``candidates`` keep their first-stage order after the reranked ones.
    """

    def __init__(self, res: Resources, candidates: int) -> None:
        if res.reranker is None:
            raise ValueError("no cross-encoder is loaded")
        self.res = res
        self.reranker = res.reranker
        self.candidates = candidates
        self.name = f"rerank:{res.reranker.name}"

    def apply(self, query: str, topics: Sequence[TopicHit]) -> list[TopicHit]:
        """Rerank the head; the linked post becomes the topic's best-scored post."""
        head, tail = list(topics[: self.candidates]), list(topics[self.candidates:])
        candidates = load_candidates(self.res, head)
        if not candidates:
            return tail
        cross_encode(self.reranker, query, candidates, self.res.reranker_residual)
        reranked = []
        for c in by_relevance(candidates):
            best = c.best_post.post_id
            order = [best, *(pid for pid in c.topic.link_order() if pid != best)]
            reranked.append(replace(c.topic, score=c.score if c.score is not None
                                    else c.topic.score, answers=tuple(order)))
        return reranked + tail


StageFactory = Callable[[Resources], TopicStage | None]


def _rerank(res: Resources) -> TopicStage | None:
    if res.reranker is None:
        return None
    # The width /v1/retrieve reranks: three times its evidence budget, at least the minimum.
    wide = max(3 * res.settings.retrieve_limit, res.settings.rerank_candidates_min)
    return CrossEncoderRerank(res, candidates=wide)


# Stage name -> factory. A later stage (MMR, neighbourhood, ...) registers here and becomes
# available to configurations by name.
STAGES: dict[str, StageFactory] = {"rerank": _rerank}


def build_stages(res: Resources, names: Sequence[str]) -> dict[str, TopicStage | None]:
    """Each named stage, or None where it cannot run with these resources."""
    unknown = [n for n in names if n not in STAGES]
    if unknown:
        raise ValueError(f"unknown stages: {', '.join(unknown)}")
    return {name: STAGES[name](res) for name in names}
