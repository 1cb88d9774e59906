"""Reciprocal rank fusion and topic aggregation (pure, no services)."""

from __future__ import annotations

import pytest

from sidecar.core.aggregate import aggregate_topics
from sidecar.core.fusion import Fusion, FusionMethod, fuse, parse_weights, rrf
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


# --- weighted RRF and score fusion ------------------------------------------------------------


def scored(*triples: tuple[int, int, float]) -> list[PostHit]:
    """(post_id, topic_id, score) triples in rank order."""
    return [PostHit(post_id=p, topic_id=t, rank=i, score=s)
            for i, (p, t, s) in enumerate(triples, start=1)]


def test_unweighted_fusion_is_exactly_rrf() -> None:
    legs = {"semantic": hits((1, 10), (2, 20), (4, 40)), "keyword": hits((2, 20), (3, 30))}
    assert fuse(legs, Fusion()) == rrf(legs)
    assert fuse(legs, Fusion(rrf_k=20)) == rrf(legs, k=20)


def test_weighted_rrf_scales_each_leg() -> None:
    legs = {"semantic": hits((1, 10), (2, 20)), "keyword": hits((2, 20), (3, 30))}
    fusion = Fusion(FusionMethod.RRF).with_weights({"semantic": 0.8, "keyword": 0.2})
    by_id = {p.post_id: p.score for p in fuse(legs, fusion)}
    assert by_id[1] == pytest.approx(0.8 / 61)
    assert by_id[2] == pytest.approx(0.8 / 62 + 0.2 / 61)
    assert by_id[3] == pytest.approx(0.2 / 62)
    # A strong semantic weight lets semantic's first place beat keyword's.
    assert [p.post_id for p in fuse(legs, fusion)][:2] == [2, 1]


def test_a_zero_weight_leg_changes_no_order_of_the_other() -> None:
    semantic = scored((1, 10, 0.9), (2, 20, 0.8), (3, 30, 0.7))
    keyword = scored((3, 30, 12.0), (4, 40, 9.0))
    for method in FusionMethod:
        fusion = Fusion(method).with_weights({"semantic": 1.0, "keyword": 0.0})
        order = [p.post_id for p in fuse({"semantic": semantic, "keyword": keyword}, fusion)]
        assert order[:3] == [1, 2, 3], method


def test_zscore_fusion_uses_how_far_ahead_a_leg_is() -> None:
    # Keyword is sure of post 3 (far ahead); semantic barely prefers 1 over 3.
    semantic = scored((1, 10, 0.80), (3, 30, 0.79), (2, 20, 0.40))
    keyword = scored((3, 30, 30.0), (1, 10, 5.0), (2, 20, 4.0))
    fused = fuse({"semantic": semantic, "keyword": keyword}, Fusion(FusionMethod.ZSCORE))
    assert fused[0].post_id == 3
    # RRF only sees ranks: a tie between 1 and 3 broken by... their best single-leg rank (1)
    # then post id: 1 first.
    assert rrf({"semantic": semantic, "keyword": keyword})[0].post_id == 1


def test_score_fusion_gives_a_missing_post_the_legs_floor() -> None:
    semantic = scored((1, 10, 0.9), (2, 20, 0.5))
    keyword = scored((3, 30, 10.0), (1, 10, 2.0))
    z = {p.post_id: p.score for p in fuse({"semantic": semantic, "keyword": keyword},
                                          Fusion(FusionMethod.ZSCORE))}
    # z of a two-item list is +1/-1: post 2 (semantic -1, keyword missing -> floor -1).
    assert z[2] == pytest.approx(-2.0)
    assert z[1] == pytest.approx(1.0 - 1.0)
    mm = {p.post_id: p.score for p in fuse({"semantic": semantic, "keyword": keyword},
                                           Fusion(FusionMethod.MINMAX))}
    assert mm[3] == pytest.approx(1.0) and mm[2] == pytest.approx(0.0)
    assert mm[1] == pytest.approx(1.0)


def test_score_fusion_of_constant_scores_keeps_the_leg_order() -> None:
    legs = {"semantic": scored((1, 1, 0.5), (2, 2, 0.5))}
    for method in (FusionMethod.ZSCORE, FusionMethod.MINMAX):
        assert [p.post_id for p in fuse(legs, Fusion(method))] == [1, 2]


def test_parse_weights() -> None:
    assert parse_weights("semantic=0.7, keyword=0.3") == {"semantic": 0.7, "keyword": 0.3}
    assert parse_weights("") == {}
    for bad in ("semantic", "semantic=-1", "semantic=x", "=1", "semantic=nan"):
        with pytest.raises(ValueError):
            parse_weights(bad)
