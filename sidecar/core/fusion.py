"""Reciprocal rank fusion of post-level rankings (Cormack, Clarke & Büttcher, 2009)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sidecar.core.types import FusedPost, PostHit


def rrf(rankings: Mapping[str, Sequence[PostHit]], k: int = 60) -> list[FusedPost]:
    """Fuse several post rankings: score(p) = sum over legs of 1 / (k + rank_leg(p)).

    Ranks are 1-based. A post missing from a leg contributes nothing for that leg. Ties are
    broken by the best single-leg rank, then by post id, so the order is deterministic.
    """
    if k < 0:
        raise ValueError("k must be >= 0")
    scores: dict[int, float] = {}
    topics: dict[int, int] = {}
    ranks: dict[int, dict[str, int]] = {}
    leg_scores: dict[int, dict[str, float]] = {}
    for leg, hits in rankings.items():
        for hit in hits:
            # A leg should not list a post twice; if it does, its best rank counts once.
            if leg in ranks.get(hit.post_id, {}):
                continue
            scores[hit.post_id] = scores.get(hit.post_id, 0.0) + 1.0 / (k + hit.rank)
            topics[hit.post_id] = hit.topic_id
            ranks.setdefault(hit.post_id, {})[leg] = hit.rank
            leg_scores.setdefault(hit.post_id, {})[leg] = hit.score
    fused = [
        FusedPost(
            post_id=pid,
            topic_id=topics[pid],
            score=score,
            ranks=ranks[pid],
            leg_scores=leg_scores[pid],
        )
        for pid, score in scores.items()
    ]
    fused.sort(key=lambda p: (-p.score, min(p.ranks.values()), p.post_id))
    return fused
