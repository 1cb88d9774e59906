"""The served default fusion: cosine similarity lifted by keyword scores (pure)."""

from __future__ import annotations

import pytest

from sidecar.core.fusion import DEFAULT_LIFT, Fusion, FusionMethod, fuse
from sidecar.core.ranking import fusion_signals, rank_topics
from sidecar.core.searchconfig import SearchConfig
from sidecar.core.types import Leg, Mode, PostHit


def leg(*rows: tuple[int, int, float]) -> list[PostHit]:
    """(post_id, topic_id, score) in rank order."""
    return [PostHit(post_id=p, topic_id=t, rank=i, score=s)
            for i, (p, t, s) in enumerate(rows, start=1)]


LIFT = Fusion(FusionMethod.LIFT, lift=0.02)


def test_a_clear_semantic_winner_keeps_its_place_against_the_keyword_leg() -> None:
    # Post 1 is 0.10 more similar: the keyword leg's first place (post 2) cannot overturn that.
    semantic = leg((1, 10, 0.80), (2, 20, 0.70))
    keyword = leg((2, 20, 30.0), (5, 50, 4.0), (1, 10, 3.0))
    order = [p.post_id for p in fuse({"semantic": semantic, "keyword": keyword}, LIFT)]
    assert order[:2] == [1, 2]
    # Rank fusion, which throws the similarities away, lets the keyword leg decide.
    rrf = [p.post_id for p in fuse({"semantic": semantic, "keyword": keyword}, Fusion())]
    assert rrf[0] == 2


def test_keywords_decide_between_near_equal_similarities() -> None:
    semantic = leg((1, 10, 0.500), (2, 20, 0.495))
    keyword = leg((2, 20, 12.0), (1, 10, 2.0))
    fused = fuse({"semantic": semantic, "keyword": keyword}, LIFT)
    assert [p.post_id for p in fused] == [2, 1]
    by_id = {p.post_id: p.score for p in fused}
    assert by_id[2] == pytest.approx(0.495 + 0.02 * 12.0 / 12.0)
    assert by_id[1] == pytest.approx(0.500 + 0.02 * 2.0 / 12.0)
    assert fused[0].ranks == {"semantic": 2, "keyword": 1}


def test_a_keyword_only_post_is_scored_with_its_stored_similarity() -> None:
    semantic = leg((1, 10, 0.60))
    keyword = leg((3, 30, 8.0), (4, 40, 4.0))
    fused = fuse({"semantic": semantic, "keyword": keyword}, LIFT, similarities={3: 0.50})
    by_id = {p.post_id: p.score for p in fused}
    assert by_id[3] == pytest.approx(0.50 + 0.02)
    # Without a stored similarity, a post counts as the least similar one the leg returned.
    assert by_id[4] == pytest.approx(0.60 + 0.02 * 0.5)
    assert [p.post_id for p in fused] == [4, 1, 3]


def test_lift_zero_is_semantic_alone_and_the_keyword_leg_does_not_run() -> None:
    semantic = leg((1, 10, 0.7), (2, 20, 0.6))
    keyword = leg((2, 20, 9.0))
    none = Fusion(FusionMethod.LIFT, lift=0.0)
    assert [p.post_id for p in fuse({"semantic": semantic, "keyword": keyword}, none)] == [1, 2]
    assert SearchConfig(Mode.HYBRID, none).legs() == (Leg.SEMANTIC,)
    assert SearchConfig(Mode.HYBRID, LIFT).legs() == (Leg.SEMANTIC, Leg.KEYWORD)


def test_a_negative_or_infinite_lift_is_refused() -> None:
    with pytest.raises(ValueError, match="lift"):
        fuse({"semantic": leg((1, 1, 0.5))}, Fusion(FusionMethod.LIFT, lift=-0.1))
    with pytest.raises(ValueError, match="lift"):
        fuse({"semantic": leg((1, 1, 0.5))}, Fusion(FusionMethod.LIFT, lift=float("inf")))


def test_lift_describes_itself_without_rrf_parameters() -> None:
    assert LIFT.describe() == {"method": "lift", "lift": 0.02}
    assert Fusion(FusionMethod.LIFT).lift == DEFAULT_LIFT


def test_the_fuse_step_says_what_served_it_and_the_signals_it_read() -> None:
    from sidecar.core.trace import Trace

    rankings = {"semantic": leg((1, 10, 0.500), (2, 20, 0.495)),
                "keyword": leg((2, 20, 12.0), (1, 10, 2.0))}
    trace = Trace()
    topics = rank_topics(rankings, SearchConfig(Mode.HYBRID, LIFT), trace,
                         served_by={"source": "settings"})
    assert [t.topic_id for t in topics] == [20, 10]
    step = next(s for s in trace.as_list() if s["step"] == "fuse")
    assert step["detail"]["served_by"] == {"source": "settings"}
    assert step["detail"]["signals"] == {"semantic_top": 0.5, "semantic_gap": 0.005,
                                         "keyword_top": 12.0,
                                         "first_topic_from": "keyword lift"}
    assert fusion_signals({"semantic": leg((1, 10, 0.9))}, 10) == {
        "semantic_top": 0.9, "semantic_gap": None, "first_topic_from": "semantic leg"}
