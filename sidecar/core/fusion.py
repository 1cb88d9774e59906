"""Fusion of post-level rankings: semantic similarity lifted by keywords, reciprocal rank
fusion, normalised score fusion.

Four methods; the last three have a weight per leg:

- ``lift`` (the served default): a post scores its cosine similarity with the question, plus
  ``lift`` times its keyword score relative to the keyword leg's best (BM25 / best BM25, in
  [0, 1]). The keyword leg can therefore reorder posts whose similarities are within ``lift`` of
  each other, and no more: where the semantic leg is sure (a clear gap), it keeps its order;
  where it hesitates (near-equal similarities: a question in a language the model reads badly,
  an identifier it splits into pieces), the keywords decide. Rank fusion cannot tell the two
  apart, since it throws the similarities away; on a forum of short entries asked in paraphrase
  it let a weak keyword leg pull good semantic answers down (docs/search.md). A post only the
  keyword leg found is scored with its own stored similarity (``similarities``); ``lift`` is in
  cosine units, chosen by cross-validation over five judged sets (docs/evaluation.md).

- ``rrf``: score(p) = sum over legs of w_leg / (k + rank_leg(p)) (Cormack, Clarke & Büttcher,
  2009). Ranks only: robust, but it throws away how far ahead a leg's first post is.
- ``zscore``: each leg's scores are standardised over the list that leg returned, then summed
  with the weights. A post a leg did not return counts as that leg's lowest returned score (it
  is at most as good as the worst the leg kept).
- ``minmax``: each leg's scores are scaled to [0, 1] over its list (missing = 0), then summed.

Equal weights of 1 with ``rrf`` are the classic, unweighted RRF. A weight of 0 switches a leg off
without changing the other's order, so "semantic alone" is one point of the same space.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

from sidecar.core.types import FusedPost, Leg, PostHit

# The keyword lift in cosine units (docs/evaluation.md, "The served default").
DEFAULT_LIFT = 0.02


class FusionMethod(StrEnum):
    """How leg rankings become one."""

    LIFT = "lift"
    RRF = "rrf"
    ZSCORE = "zscore"
    MINMAX = "minmax"


@dataclass(frozen=True, slots=True)
class Fusion:
    """A fusion method with its parameters; ``weights`` missing a leg give it weight 1.

    ``lift`` is used by ``lift`` only, ``rrf_k`` by ``rrf`` only, ``weights`` by the others.
    """

    method: FusionMethod = FusionMethod.RRF
    weights: tuple[tuple[str, float], ...] = ()
    rrf_k: int = 60
    lift: float = DEFAULT_LIFT

    def weight(self, leg: str) -> float:
        """The weight of a leg (1.0 when not named; under ``lift`` the keyword leg weighs
        ``lift``)."""
        if self.method is FusionMethod.LIFT:
            return self.lift if leg == Leg.KEYWORD else 1.0
        return dict(self.weights).get(leg, 1.0)

    def with_weights(self, weights: Mapping[str, float]) -> Fusion:
        """The same method with other weights (sorted by leg name, so equal specs compare equal)."""
        return Fusion(self.method, tuple(sorted(weights.items())), self.rrf_k, self.lift)

    def describe(self) -> dict[str, object]:
        """JSON form (weights as a mapping; ``rrf_k`` and ``lift`` only where they matter)."""
        if self.method is FusionMethod.LIFT:
            return {"method": self.method.value, "lift": self.lift}
        out: dict[str, object] = {"method": self.method.value,
                                  "weights": {leg: w for leg, w in self.weights}}
        if self.method is FusionMethod.RRF:
            out["rrf_k"] = self.rrf_k
        return out


def parse_weights(text: str) -> dict[str, float]:
    """Parse ``"semantic=0.7,keyword=0.3"`` into a mapping (ValueError when malformed)."""
    out: dict[str, float] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        leg, sep, value = part.partition("=")
        if not sep or not leg.strip():
            raise ValueError(f"expected leg=weight, got {part!r}")
        weight = float(value)
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"weight of {leg.strip()} must be a finite number >= 0")
        out[leg.strip()] = weight
    return out


@dataclass
class _Acc:
    topic_id: int
    score: float = 0.0
    ranks: dict[str, int] = field(default_factory=dict)
    leg_scores: dict[str, float] = field(default_factory=dict)


def _first_hits(hits: Iterable[PostHit]) -> list[PostHit]:
    # A leg should not list a post twice; if it does, its best rank counts once.
    seen: set[int] = set()
    out = []
    for hit in hits:
        if hit.post_id not in seen:
            seen.add(hit.post_id)
            out.append(hit)
    return out


def _normalised(hits: Sequence[PostHit], method: FusionMethod) -> tuple[list[float], float]:
    """Each hit's normalised score, and the value of a post the leg did not return."""
    scores = [h.score for h in hits]
    if method in (FusionMethod.RRF, FusionMethod.LIFT):
        return scores, 0.0
    low, high = min(scores), max(scores)
    if method is FusionMethod.MINMAX:
        span = high - low
        return [(s - low) / span if span > 0 else 1.0 for s in scores], 0.0
    mean = sum(scores) / len(scores)
    sd = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
    if sd == 0:
        return [0.0] * len(scores), 0.0
    z = [(s - mean) / sd for s in scores]
    return z, min(z)


def _lift_scores(rankings: Mapping[str, Sequence[PostHit]], fusion: Fusion,
                 similarities: Mapping[int, float]) -> dict[int, float]:
    """``lift``: similarity + lift * keyword score / the keyword leg's best score."""
    semantic = _first_hits(rankings.get(Leg.SEMANTIC, ()))
    keyword = _first_hits(rankings.get(Leg.KEYWORD, ()))
    sims = {**similarities, **{h.post_id: h.score for h in semantic}}
    # A keyword hit without a stored vector counts as the least similar post the semantic leg
    # returned (it is at most that similar, or the leg would have found it).
    floor = min((h.score for h in semantic), default=0.0)
    best = max((h.score for h in keyword), default=0.0)
    scores = {h.post_id: h.score for h in semantic}
    for hit in keyword:
        base = scores.get(hit.post_id, sims.get(hit.post_id, floor))
        scores[hit.post_id] = base + (fusion.lift * hit.score / best if best > 0 else 0.0)
    return scores


def fuse(rankings: Mapping[str, Sequence[PostHit]], fusion: Fusion = Fusion(),
         similarities: Mapping[int, float] | None = None) -> list[FusedPost]:
    """One post ranking from several, by ``fusion``; best first.

    Ties are broken by the best single-leg rank, then by post id, so the order is deterministic.
    A leg with weight 0 contributes nothing to scores but its ranks are still reported.
    ``similarities`` (``lift`` only) are the stored cosine similarities of posts the keyword leg
    found and the semantic leg did not.
    """
    if fusion.rrf_k < 0:
        raise ValueError("k must be >= 0")
    if not math.isfinite(fusion.lift) or fusion.lift < 0:
        raise ValueError("lift must be a finite number >= 0")
    lifted = (_lift_scores(rankings, fusion, similarities or {})
              if fusion.method is FusionMethod.LIFT else None)
    acc: dict[int, _Acc] = {}
    floors: dict[str, float] = {}
    for leg, leg_hits in rankings.items():
        hits = _first_hits(leg_hits)
        if not hits:
            continue
        values, floors[leg] = _normalised(hits, fusion.method)
        weight = fusion.weight(leg)
        for hit, value in zip(hits, values, strict=True):
            entry = acc.setdefault(hit.post_id, _Acc(hit.topic_id))
            if lifted is not None:
                entry.score = lifted[hit.post_id]
            elif fusion.method is FusionMethod.RRF:
                entry.score += weight / (fusion.rrf_k + hit.rank)
            else:
                entry.score += weight * value
            entry.ranks[leg] = hit.rank
            entry.leg_scores[leg] = hit.score
    if fusion.method in (FusionMethod.ZSCORE, FusionMethod.MINMAX):
        # A post missing from a leg gets that leg's floor value.
        for entry in acc.values():
            for leg, floor in floors.items():
                if leg not in entry.ranks:
                    entry.score += fusion.weight(leg) * floor
    fused = [FusedPost(post_id=pid, topic_id=e.topic_id, score=e.score, ranks=e.ranks,
                       leg_scores=e.leg_scores) for pid, e in acc.items()]
    fused.sort(key=lambda p: (-p.score, min(p.ranks.values()), p.post_id))
    return fused


def rrf(rankings: Mapping[str, Sequence[PostHit]], k: int = 60) -> list[FusedPost]:
    """Unweighted reciprocal rank fusion: score(p) = sum over legs of 1 / (k + rank_leg(p))."""
    return fuse(rankings, Fusion(FusionMethod.RRF, (), k))
