"""Reciprocal rank fusion and topic aggregation (pure, no services)."""

from __future__ import annotations

import pytest

from sidecar.core.aggregate import aggregate_topics
from sidecar.core.fusion import rrf
from sidecar.core.types import FusedPost, Mode, PostHit, TopicScore


def hits(*pairs: tuple[int, int]) -> list[PostHit]:
    """(post_id, topic_id) pairs in rank order."""
    return [PostHit(post_id=p, topic_id=t, rank=i, score=1.0 / i)
            for i, (p, t) in enumerate(pairs, start=1)]


def test_rrf_scores_are_sums_of_reciprocal_ranks() -> None:
    fused = rrf({"semantic": hits((1, 10), (2, 20)), "keyword": hits((2, 20), (3, 30))}, k=60)
    by_id = {p.post_id: p for p in fused}
    assert by_id[2].score == pytest.approx(1 / 62 + 1 / 61)
    assert by_id[1].score == pytest.approx(1 / 61)
    assert by_id[3].score == pytest.approx(1 / 62)
    assert [p.post_id for p in fused] == [2, 1, 3]
    assert by_id[2].ranks == {"semantic": 2, "keyword": 1}
    assert by_id[1].ranks == {"semantic": 1}


def test_rrf_agreement_beats_a_single_first_place() -> None:
    # Found second by both legs outranks found first by one leg only.
    fused = rrf({"a": hits((1, 1), (2, 2)), "b": hits((3, 3), (2, 2))})
    assert fused[0].post_id == 2


def test_rrf_k_changes_how_much_top_ranks_dominate() -> None:
    legs = {"a": hits((1, 1), (2, 2), (3, 3)), "b": hits((3, 3), (4, 4), (2, 2))}
    low_k = [p.post_id for p in rrf(legs, k=0)]
    high_k = [p.post_id for p in rrf(legs, k=1000)]
    # With k=0 a first place weighs 1.0 and wins; with a large k, being found twice wins.
    assert low_k[0] in {1, 3}
    assert high_k[:2] == [3, 2]


def test_rrf_ignores_a_duplicate_in_one_leg_and_rejects_negative_k() -> None:
    leg = [PostHit(1, 1, 1, 0.9), PostHit(1, 1, 2, 0.8)]
    assert rrf({"a": leg})[0].score == pytest.approx(1 / 61)
    with pytest.raises(ValueError):
        rrf({"a": leg}, k=-1)


def test_rrf_of_nothing_is_empty() -> None:
    assert rrf({}) == []
    assert rrf({"semantic": [], "keyword": []}) == []


def fp(post: int, topic: int, score: float) -> FusedPost:
    return FusedPost(post_id=post, topic_id=topic, score=score)


def test_aggregation_gives_one_entry_per_topic() -> None:
    # A megathread with many strong posts takes one slot, not all of them.
    posts = [fp(i, 1, 1.0 - i / 100) for i in range(10)] + [fp(100, 2, 0.5), fp(101, 3, 0.4)]
    topics = aggregate_topics(posts)
    assert [t.topic_id for t in topics] == [1, 2, 3]
    assert topics[0].best.post_id == 0
    assert len(topics[0].posts) == 10


def test_best_and_mean_of_two_can_disagree() -> None:
    posts = [fp(1, 1, 0.9), fp(2, 1, 0.1), fp(3, 2, 0.6), fp(4, 2, 0.6)]
    best = aggregate_topics(posts, TopicScore.BEST)
    mean2 = aggregate_topics(posts, TopicScore.MEAN2)
    assert [t.topic_id for t in best] == [1, 2]
    assert [t.topic_id for t in mean2] == [2, 1]
    assert mean2[1].score == pytest.approx(0.5)


def test_mean_of_two_with_a_single_post_uses_that_post() -> None:
    topics = aggregate_topics([fp(1, 7, 0.3)], TopicScore.MEAN2)
    assert topics[0].score == pytest.approx(0.3)


def test_modes_name_their_legs() -> None:
    assert [leg.value for leg in Mode.HYBRID.legs()] == ["semantic", "keyword"]
    assert [leg.value for leg in Mode.KEYWORD.legs()] == ["keyword"]
