"""Which post of a ranked topic the link, the excerpt and the evidence point at (pure).

What ranks a topic and what answers the question are different things: the opening post often
repeats the question's words (so both legs rank it first) while a reply holds the answer. Each
ranked topic therefore gets its posts scored again, one by one, by a linear rule over
features read from the forum (``sidecar/db/post_features.py``):

* ``similarity``: the post's stored vector against the question (cosine);
* ``keyword``: its BM25 relative to the keyword leg's best post (0 when the leg missed it);
* ``accepted``: one of the topic's accepted answers (Discourse Solved; several since 2026-04);
* ``opening``: the opening post (the question itself);
* ``by_asker``: a reply by the topic's author (a follow-up, a "thanks, it works");
* ``likes``: log(1 + likes); ``staff``: written by an admin or a moderator;
* ``replied``: log(1 + replies it received).

The fixed rule (:data:`ANSWER_RULE`) needs no label: the accepted answer when there is one (of
several, the one most similar to the question), else the reply by someone other than the asker
most similar to the question (keywords break near ties, as in the fusion), else a reply by the
asker, else the opening post. Its weights make those steps strict (a cosine moves by at most
2). ``sidecar tune-links`` may replace it with weights learned from the forum's own labels
(docs/search.md, "The linked post").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

FEATURES: tuple[str, ...] = ("similarity", "keyword", "accepted", "opening", "by_asker",
                             "likes", "staff", "replied")


class Chooser(StrEnum):
    """How the linked post of a topic is chosen."""

    ANSWER = "answer"  # the linear rule (fixed, or learned by `sidecar tune`)
    FUSED = "fused"  # the topic's best fused post (what ranked it; before 2026-12)
    SEMANTIC = "semantic"  # the post most similar to the question


@dataclass(frozen=True, slots=True)
class PostFeatures:
    """One public post of a ranked topic, as the chooser reads it."""

    post_id: int
    post_number: int
    similarity: float | None  # None: no stored vector (or no query vector)
    keyword: float = 0.0
    fused: float | None = None  # its fused score when a leg found it
    accepted: bool = False
    by_asker: bool = False
    likes: int = 0
    staff: bool = False
    replied: int = 0

    def values(self) -> dict[str, float]:
        """The feature vector (a missing similarity counts as 0)."""
        return {"similarity": self.similarity if self.similarity is not None else 0.0,
                "keyword": self.keyword, "accepted": float(self.accepted),
                "opening": float(self.post_number == 1), "by_asker": float(self.by_asker),
                "likes": math.log1p(max(self.likes, 0)), "staff": float(self.staff),
                "replied": math.log1p(max(self.replied, 0))}


@dataclass(frozen=True, slots=True)
class LinkRule:
    """A linear score over :data:`FEATURES`; the post with the highest score is linked."""

    weights: tuple[tuple[str, float], ...]
    source: str = "fixed"  # "fixed", or where learned weights came from

    def __post_init__(self) -> None:
        unknown = {name for name, _ in self.weights} - set(FEATURES)
        if unknown:
            raise ValueError(f"unknown post feature(s): {', '.join(sorted(unknown))}")
        if not all(math.isfinite(w) for _, w in self.weights):
            raise ValueError("post feature weights must be finite")

    def score(self, post: PostFeatures) -> float:
        """The post's score under this rule."""
        values = post.values()
        return sum(w * values[name] for name, w in self.weights)

    def as_dict(self) -> dict[str, float]:
        """The weights as a mapping (JSON)."""
        return dict(self.weights)

    @classmethod
    def of(cls, weights: Mapping[str, float], source: str) -> LinkRule:
        """A rule from a mapping (sorted, so equal rules compare equal)."""
        return cls(tuple(sorted(weights.items())), source)


ANSWER_RULE = LinkRule.of({"similarity": 1.0, "keyword": 0.02, "accepted": 4.0,
                           "opening": -4.0, "by_asker": -2.0}, "fixed")


@dataclass(frozen=True, slots=True)
class Choice:
    """The topic's posts in the chooser's order (best first) and why the first won."""

    order: tuple[int, ...]
    reason: str
    scores: dict[int, float] = field(default_factory=dict)


def _reason(post: PostFeatures) -> str:
    if post.accepted:
        return "accepted answer"
    if post.post_number == 1:
        return "opening post (no reply to link)"
    if post.by_asker:
        return "reply by the asker (no other reply)"
    return "reply most similar to the question"


def choose(posts: Sequence[PostFeatures], chooser: Chooser = Chooser.ANSWER,
           rule: LinkRule = ANSWER_RULE) -> Choice:
    """Order a topic's posts for linking (``posts`` must not be empty).

    Ties go to the earlier post, so the order is deterministic.
    """
    if not posts:
        raise ValueError("a topic needs at least one post to link")
    if chooser is Chooser.FUSED:
        ranked = sorted(posts, key=lambda p: (p.fused is None, -(p.fused or 0.0), p.post_number))
        return Choice(tuple(p.post_id for p in ranked), "best fused post")
    if chooser is Chooser.SEMANTIC:
        ranked = sorted(posts, key=lambda p: (p.similarity is None, -(p.similarity or 0.0),
                                              p.post_number))
        return Choice(tuple(p.post_id for p in ranked), "post most similar to the question")
    scores = {p.post_id: rule.score(p) for p in posts}
    ranked = sorted(posts, key=lambda p: (-scores[p.post_id], p.post_number))
    reason = _reason(ranked[0]) if rule.source == "fixed" else f"learned rule ({rule.source})"
    return Choice(tuple(p.post_id for p in ranked), reason,
                  {pid: round(s, 6) for pid, s in scores.items()})
