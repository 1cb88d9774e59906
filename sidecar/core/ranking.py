"""From the legs' post rankings to ranked topics: fusion, aggregation, what the fusion read
(pure: no I/O; ``SearchService`` runs the legs around it)."""

from __future__ import annotations

from typing import Any

from sidecar.core.aggregate import aggregate_topics
from sidecar.core.fusion import FusionMethod, fuse
from sidecar.core.searchconfig import SearchConfig
from sidecar.core.trace import Trace
from sidecar.core.types import Leg, PostHit, TopicHit

# The most posts a leg is asked for when aggregation leaves too few topics.
MAX_POST_CANDIDATES = 5000


def fusion_signals(rankings: dict[str, list[PostHit]], fused_first: int | None
                   ) -> dict[str, Any]:
    """What a fusion that follows the query read: the semantic leg's best topic similarity
    and its gap to the second, the keyword leg's best BM25, and whether the fused first topic
    is the semantic leg's (pure)."""
    out: dict[str, Any] = {}
    semantic = rankings.get(Leg.SEMANTIC, [])
    best: dict[int, float] = {}
    for hit in semantic:
        best.setdefault(hit.topic_id, hit.score)
    tops = list(best.values())
    if tops:
        out["semantic_top"] = round(tops[0], 4)
        out["semantic_gap"] = round(tops[0] - tops[1], 4) if len(tops) > 1 else None
    keyword = rankings.get(Leg.KEYWORD, [])
    if keyword:
        out["keyword_top"] = round(keyword[0].score, 4)
    if best and fused_first is not None:
        out["first_topic_from"] = ("semantic leg" if fused_first == next(iter(best))
                                   else "keyword lift")
    return out


def rank_topics(
    rankings: dict[str, list[PostHit]], config: SearchConfig, trace: Trace | None = None,
    *, similarities: dict[int, float] | None = None, served_by: dict[str, Any] | None = None,
) -> list[TopicHit]:
    """Fuse the legs' post rankings and aggregate per topic (pure: no I/O)."""
    trace = trace or Trace()
    with trace.step("fuse") as detail:
        fused = fuse(rankings, config.fusion, similarities)
        detail.update(config.fusion.describe() if len(rankings) > 1
                      else {"method": "single leg"}, posts=len(fused))
        if served_by:
            detail["served_by"] = served_by
        if len(rankings) > 1 and config.fusion.method is FusionMethod.LIFT:
            detail["signals"] = fusion_signals(rankings, fused[0].topic_id if fused else None)
    with trace.step("aggregate") as detail:
        topics = aggregate_topics(fused, config.topic_score)
        detail.update(method=config.topic_score.value, topics=len(topics))
    return topics


def enough_topics(
    topics: list[TopicHit], rankings: dict[str, list[PostHit]], n_topics: int, post_k: int
) -> bool:
    """False when aggregation left fewer topics than asked while a leg was cut off at post_k."""
    cut_off = any(len(hits) >= post_k for hits in rankings.values())
    return len(topics) >= n_topics or not cut_off or post_k >= MAX_POST_CANDIDATES
