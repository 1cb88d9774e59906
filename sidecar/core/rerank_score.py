"""What a cross-encoder reads, and how the forum's own reranker's score is made (pure).

A cross-encoder reads the question against one post, preceded by its topic's title: the title
says what the thread is about, which a reply alone often does not ("Take it, a good offer").
The bi-encoder's vectors hold the title too (embedding strategy 1), so both see the same thread.

The reranker that ``sidecar train-reranker`` builds from a forum's threads is trained as a
*demotion* of the bi-encoder's score: the post's cosine, as log-odds fitted on the same pairs
before training, plus the log-probability the cross-encoder gives that the post answers
(:class:`Residual`). The cross-encoder can only lower a post, never lift it: a model that
learned nothing scores like the cosine, and a question nothing on the forum is close to stays
far, so the zone keeps the cosine's sense of "nothing here" for off-topic questions. (An
additive correction was tried first: it lifted chatty replies to off-topic questions and the
calibrated abstain rate out of domain fell from 92% to 11%; docs/answerability.md.) A general
cross-encoder (mmarco) has no residual: its logit is the score.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sidecar.core.evidence import passage

# Between the title and the post's text: a visible boundary for the tokenizer.
TITLE_SEPARATOR = " — "


def rerank_passage(title: str, text: str) -> str:
    """The text a cross-encoder reads for a post: its topic's title, then the post's words."""
    return passage(f"{title}{TITLE_SEPARATOR}{text}" if title else text)


@dataclass(frozen=True, slots=True)
class Residual:
    """``score = cosine * cosine_weight + bias + log(sigmoid(logit))``: the reranker as a
    demotion of the bi-encoder whose ``model`` and ``strategy`` gave the cosines."""

    model: str
    strategy: int
    cosine_weight: float
    bias: float

    def prior(self, cosine: float | None) -> float:
        """The cosine's own log-odds that a post answers; a post without a vector counts 0."""
        return (cosine or 0.0) * self.cosine_weight + self.bias

    def score(self, logit: float, cosine: float | None) -> float:
        """The reranker's score of a post: its prior, lowered by how surely the cross-encoder
        says it does not answer."""
        return self.prior(cosine) + log_sigmoid(logit)


def log_sigmoid(x: float) -> float:
    """``log(1 / (1 + e^-x))`` without overflow: 0 for a sure yes, about ``x`` for a sure no."""
    return -math.log1p(math.exp(-x)) if x >= 0 else x - math.log1p(math.exp(x))
