"""The rerank chain's pure core: MMR, bounded boosts, flags (no database)."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from sidecar.core.chain import (
    MAX_CANDIDATES,
    ChainFlags,
    SearchPriority,
    TopicFeatures,
    apply_chain,
    boost,
    boost_signal,
    boost_window,
    mmr,
    normalised_scores,
    tied_ranks,
)
from sidecar.core.types import FusedPost, TopicHit

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def topic(topic_id: int, score: float, post_id: int | None = None) -> TopicHit:
    post = FusedPost(post_id=post_id or topic_id * 10, topic_id=topic_id, score=score)
    return TopicHit(topic_id=topic_id, score=score, posts=(post,))


def ids(topics: list[TopicHit]) -> list[int]:
    return [t.topic_id for t in topics]


def unit(*values: float) -> np.ndarray:
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


# --- flags ------------------------------------------------------------------------------------

def test_flags_default_to_every_stage_off() -> None:
    flags = ChainFlags()
    assert not flags.reorders and not flags.knee and flags.stages() == []


def test_flags_list_stages_in_their_fixed_order() -> None:
    assert ChainFlags(knee=True, boosts=True, mmr=True).stages() == ["mmr", "boosts", "knee"]


@pytest.mark.parametrize("bad", [{"mmr_lambda": 1.5}, {"boost_positions": -1.0},
                                 {"boost_likes": -0.1}, {"boost_half_life_days": 0.0},
                                 {"knee_min_items": 0}, {"knee_sensitivity": 2.0}])
def test_flags_refuse_out_of_range_parameters(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=next(iter(bad))):
        ChainFlags(**bad)  # type: ignore[arg-type]


def test_search_priority_is_discourses_enum() -> None:
    # Searchable::PRIORITIES = Enum.new(ignore: 1, very_low: 2, low: 3, normal: 0, high: 4,
    # very_high: 5) in discourse/discourse app/models/concerns/searchable.rb.
    assert [(p.name, p.value) for p in SearchPriority] == [
        ("NORMAL", 0), ("IGNORE", 1), ("VERY_LOW", 2), ("LOW", 3), ("HIGH", 4),
        ("VERY_HIGH", 5)]


# --- identity ---------------------------------------------------------------------------------

def test_every_flag_off_returns_the_input_unchanged() -> None:
    topics = [topic(i, 1.0 / (60 + i)) for i in range(1, 30)]
    vectors = {t.best.post_id: unit(1.0, 0.0) for t in topics}  # all identical: MMR would move
    feats = {t.topic_id: TopicFeatures(t.topic_id, accepted_answer_post_id=t.best.post_id)
             for t in topics[5:]}
    out = apply_chain(topics, ChainFlags(knee=True), feats, vectors, None, NOW)
    assert out == topics


def test_chain_never_adds_or_drops_topics() -> None:
    rng = np.random.default_rng(3)
    topics = [topic(i, float(s)) for i, s in enumerate(sorted(rng.random(80), reverse=True), 1)]
    vectors = {t.best.post_id: rng.normal(size=16).astype(np.float32) for t in topics}
    feats = {t.topic_id: TopicFeatures(t.topic_id, post_like_count=int(rng.integers(0, 50)),
                                       search_priority=int(rng.integers(0, 6)))
             for t in topics}
    out = apply_chain(topics, ChainFlags(mmr=True, boosts=True), feats, vectors, None, NOW)
    assert sorted(ids(out)) == sorted(ids(topics)) and out != topics
    assert {id(t) for t in out} == {id(t) for t in topics}  # the same objects, not edited


# --- MMR --------------------------------------------------------------------------------------

def test_normalised_scores_are_scale_free() -> None:
    topics = [topic(1, 0.033), topic(2, 0.020), topic(3, 0.016)]
    shifted = [topic(1, 3.3 - 7), topic(2, 2.0 - 7), topic(3, 1.6 - 7)]
    assert np.allclose(normalised_scores(topics), normalised_scores(shifted))
    assert normalised_scores([topic(1, 0.5), topic(2, 0.5)]).tolist() == [1.0, 1.0]


# A weak, unrelated tail: relevance is min-max normalised within the list, so the weakest
# candidate sits at 0 and the three under test keep relevances near 1.
TAIL = [topic(9, 0.0)]
TAIL_VECTOR = {90: unit(0, 0, 0, 1)}


def test_mmr_demotes_a_near_duplicate_below_a_distinct_topic() -> None:
    topics = [topic(1, 1.0), topic(2, 0.95), topic(3, 0.9), *TAIL]
    vectors = {10: unit(1, 0, 0, 0), 20: unit(1, 0.05, 0, 0), 30: unit(0, 1, 0, 0),
               **TAIL_VECTOR}
    assert ids(mmr(topics, vectors, 0.7)) == [1, 3, 2, 9]
    assert ids(mmr(topics, vectors, 1.0)) == [1, 2, 3, 9]  # lambda 1: relevance only


def test_mmr_keeps_the_order_of_distinct_topics() -> None:
    topics = [topic(i, 1.0 - i / 10) for i in range(1, 6)]
    vectors = {t.best.post_id: np.eye(5, dtype=np.float32)[i] for i, t in enumerate(topics)}
    assert ids(mmr(topics, vectors, 0.5)) == [1, 2, 3, 4, 5]


def test_mmr_is_invariant_to_the_fusion_scale() -> None:
    rng = np.random.default_rng(7)
    raw = sorted(rng.random(40), reverse=True)
    vectors = {i * 10: rng.normal(size=8).astype(np.float32) for i in range(1, 41)}
    rrf_like = [topic(i, 0.03 * s) for i, s in enumerate(raw, 1)]
    z_like = [topic(i, 4.0 * s - 2.0) for i, s in enumerate(raw, 1)]
    assert ids(mmr(rrf_like, vectors, 0.6)) == ids(mmr(z_like, vectors, 0.6))


def test_mmr_query_residual_ignores_what_two_posts_share_with_the_query() -> None:
    # Both posts lean on the query direction (x) but say different things beyond it.
    topics = [topic(1, 1.0), topic(2, 0.97), topic(3, 0.93), *TAIL]
    vectors = {10: unit(1, 0.3, 0, 0), 20: unit(1, 0, 0.3, 0), 30: unit(0.2, 1, 0.2, 0),
               **TAIL_VECTOR}
    query = unit(1, 0, 0, 0)
    plain = ids(mmr(topics, vectors, 0.7))
    residual = ids(mmr(topics, vectors, 0.7, query))
    assert plain == [1, 3, 2, 9] and residual == [1, 2, 3, 9]


def test_mmr_treats_a_missing_vector_as_unrelated() -> None:
    topics = [topic(1, 1.0), topic(2, 0.95), topic(3, 0.9), *TAIL]
    vectors = {10: unit(1, 0, 0, 0), 20: unit(1, 0, 0, 0), **TAIL_VECTOR}  # 3 has none
    assert ids(mmr(topics, vectors, 0.7)) == [1, 3, 2, 9]


def test_only_the_first_max_candidates_move() -> None:
    topics = [topic(i, 1.0) for i in range(1, MAX_CANDIDATES + 6)]
    feats = {t.topic_id: TopicFeatures(t.topic_id, accepted_answer_post_id=t.best.post_id)
             for t in topics[MAX_CANDIDATES:]}
    out = apply_chain(topics, ChainFlags(boosts=True), feats, {}, None, NOW)
    assert out == topics  # the boosted ones lie beyond the bound


def test_mmr_at_300_candidates_is_fast() -> None:
    rng = np.random.default_rng(0)
    topics = [topic(i, 1.0 / (60 + i)) for i in range(1, 301)]
    vectors = {t.best.post_id: rng.normal(size=1024).astype(np.float32) for t in topics}
    mmr(topics, vectors, 0.7)  # warm up
    started = time.perf_counter()
    out = mmr(topics, vectors, 0.7)
    assert len(out) == 300
    # Not a benchmark (make bench measures it): a guard against an accidental O(k^3).
    assert time.perf_counter() - started < 1.0


# --- boosts -----------------------------------------------------------------------------------

def test_accepted_and_liked_topics_rank_above_equally_scored_ones() -> None:
    """Seed 002's gate for the metadata boost, on a constructed set."""
    topics = [topic(i, 0.5) for i in range(1, 7)]  # six topics the fusion scored equally
    feats = {
        2: TopicFeatures(2, accepted_answer_post_id=20),  # its best post is the answer
        4: TopicFeatures(4, post_like_count=40, topic_like_count=60),
        6: TopicFeatures(6, search_priority=SearchPriority.VERY_HIGH),
    }
    out = ids(boost(topics, feats, ChainFlags(boosts=True), NOW))
    assert set(out[:3]) == {2, 4, 6}
    assert out[3:] == [1, 3, 5]  # the unboosted keep their order


def test_a_boost_never_lifts_a_topic_more_than_its_bound() -> None:
    topics = [topic(i, 1.0 - i / 100) for i in range(1, 21)]
    feats = {20: TopicFeatures(20, accepted_answer_post_id=200, post_like_count=1000,
                               search_priority=SearchPriority.VERY_HIGH)}
    out = ids(boost(topics, feats, ChainFlags(boosts=True, boost_positions=1.5), NOW))
    assert out.index(20) == 19 - 1  # passes one neighbour (19 - 1.5 < 18), not two
    out = ids(boost(topics, feats, ChainFlags(boosts=True, boost_positions=5.5), NOW))
    assert out.index(20) == 19 - 5


def test_tied_scores_share_their_rank() -> None:
    topics = [topic(1, 0.9), topic(2, 0.5), topic(3, 0.5), topic(4, 0.5 + 1e-13), topic(5, 0.1)]
    assert tied_ranks(topics) == [0.0, 2.0, 2.0, 2.0, 4.0]
    assert tied_ranks([]) == []


def test_boosts_are_independent_of_the_scores_scale() -> None:
    feats = {3: TopicFeatures(3, accepted_answer_post_id=30)}
    small = [topic(1, 0.033), topic(2, 0.0329), topic(3, 0.0328)]
    large = [topic(1, 9.0), topic(2, 1.0), topic(3, -5.0)]
    flags = ChainFlags(boosts=True)
    assert ids(boost(small, feats, flags, NOW)) == ids(boost(large, feats, flags, NOW)) \
        == [1, 3, 2]


def test_accepted_answer_counts_fully_only_when_it_is_the_linked_post() -> None:
    flags = ChainFlags(boosts=True, boost_likes=0, boost_closed=0, boost_category=0)
    linked = TopicFeatures(1, accepted_answer_post_id=10)
    elsewhere = TopicFeatures(1, accepted_answer_post_id=11)
    assert boost_signal(linked, 10, flags, NOW) == 1.0
    assert boost_signal(elsewhere, 10, flags, NOW) == 0.5
    assert boost_signal(TopicFeatures(1), 10, flags, NOW) == 0.0
    assert boost_signal(None, 10, flags, NOW) == 0.0


def test_any_of_several_accepted_answers_counts_as_the_accepted_one() -> None:
    # discourse-solved accepts several answers per topic since 2026-04.
    flags = ChainFlags(boosts=True, boost_likes=0, boost_closed=0, boost_category=0)
    several = TopicFeatures(1, accepted_answer_post_id=12, accepted_answer_post_ids=(12, 10))
    assert several.is_accepted(10) and several.is_accepted(12) and not several.is_accepted(11)
    assert boost_signal(several, 10, flags, NOW) == 1.0
    assert boost_signal(several, 11, flags, NOW) == 0.5


def test_likes_are_log_damped_and_saturate() -> None:
    flags = ChainFlags(boosts=True, boost_likes=1.0, boost_likes_saturation=20)
    values = [boost_signal(TopicFeatures(1, post_like_count=n, topic_like_count=n), 10, flags,
                           NOW) for n in (0, 1, 2, 3, 20, 500)]
    assert values[0] == 0.0 and values[-2] == pytest.approx(1.0) and values[-1] == 1.0
    steps = np.diff(values[:4])
    assert steps[0] > steps[1] > steps[2] > 0  # each like adds less
    other_posts = TopicFeatures(1, post_like_count=0, topic_like_count=10)
    own_post = TopicFeatures(1, post_like_count=10, topic_like_count=10)
    assert 0 < boost_signal(other_posts, 10, flags, NOW) < boost_signal(own_post, 10, flags, NOW)


def test_recency_halves_per_half_life_and_is_off_by_default() -> None:
    flags = ChainFlags(boosts=True, boost_recency=1.0, boost_half_life_days=30)
    fresh = TopicFeatures(1, post_created_at=(NOW - timedelta(days=0)).replace(tzinfo=None))
    month = TopicFeatures(1, post_created_at=NOW - timedelta(days=30))
    assert boost_signal(fresh, 10, flags, NOW) == pytest.approx(1.0)
    assert boost_signal(month, 10, flags, NOW) == pytest.approx(0.5)
    assert boost_signal(month, 10, ChainFlags(boosts=True), NOW) == 0.0
    topics = [topic(1, 0.9), topic(2, 0.9)]
    feats = {1: TopicFeatures(1, last_posted_at=datetime(2015, 1, 1)),
             2: TopicFeatures(2, last_posted_at=datetime(2026, 5, 1))}
    assert ids(boost(topics, feats, flags, NOW)) == [2, 1]


def test_category_priority_follows_discourse() -> None:
    flags = ChainFlags(boosts=True)
    signal = {p: boost_signal(TopicFeatures(1, search_priority=p), 10, flags, NOW)
              for p in SearchPriority}
    assert signal[SearchPriority.VERY_HIGH] > signal[SearchPriority.HIGH] \
        > signal[SearchPriority.NORMAL] == 0.0 > signal[SearchPriority.LOW] \
        > signal[SearchPriority.VERY_LOW] == signal[SearchPriority.IGNORE]
    assert boost_signal(TopicFeatures(1, search_priority=42), 10, flags, NOW) == 0.0


def test_closed_and_archived_topics_are_nudged_down() -> None:
    topics = [topic(1, 0.5), topic(2, 0.5), topic(3, 0.5)]
    feats = {1: TopicFeatures(1, archived=True), 2: TopicFeatures(2, closed=True)}
    assert ids(boost(topics, feats, ChainFlags(boosts=True, boost_closed=1.0), NOW)) == [3, 2, 1]


def test_mmr_then_boosts_in_that_order() -> None:
    topics = [topic(1, 1.0), topic(2, 0.99), topic(3, 0.98), *TAIL]
    vectors = {10: unit(1, 0, 0, 0), 20: unit(1, 0.01, 0, 0), 30: unit(0, 1, 0, 0),
               **TAIL_VECTOR}
    feats = {2: TopicFeatures(2, accepted_answer_post_id=20)}
    flags = ChainFlags(mmr=True, mmr_lambda=0.7, boosts=True, boost_positions=1.5)
    assert ids(mmr(topics, vectors, 0.7)) == [1, 3, 2, 9]  # 2 duplicates 1
    # ... then the accepted answer of 2 passes its neighbour 3.
    assert ids(apply_chain(topics, flags, feats, vectors, None, NOW)) == [1, 2, 3, 9]


def test_mmr_chooses_within_its_pool_only() -> None:
    topics = [topic(1, 1.0), topic(2, 0.99), topic(3, 0.98), topic(4, 0.97)]
    vectors = {10: unit(1, 0), 20: unit(1, 0), 30: unit(1, 0), 40: unit(0, 1)}
    assert ids(mmr(topics, vectors, 0.5)) == [1, 4, 2, 3]  # the distinct one comes up
    assert ids(mmr(topics, vectors, 0.5, pool=3)) == [1, 2, 3, 4]  # ... unless out of the pool
    with pytest.raises(ValueError, match="mmr_depth"):
        ChainFlags(mmr_depth=60, mmr_pool=50)


@pytest.mark.parametrize("seed", range(40))
def test_features_beyond_the_boost_window_cannot_change_the_first_topics(seed: int) -> None:
    """What the adapter relies on to read only the features of topics near the page."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 120))
    # Coarse scores: long runs of ties, as single-leg RRF ranks produce.
    scores = np.sort(rng.integers(0, 12, n))[::-1] / 12.0
    topics = [topic(i, float(s)) for i, s in enumerate(scores, 1)]
    feats = {t.topic_id: TopicFeatures(
        t.topic_id, accepted_answer_post_id=t.best.post_id if rng.random() < 0.3 else None,
        post_like_count=int(rng.integers(0, 30)), search_priority=int(rng.integers(0, 6)),
        closed=bool(rng.random() < 0.1), archived=bool(rng.random() < 0.05))
        for t in topics}
    flags = ChainFlags(boosts=True, boost_positions=float(rng.choice([0.5, 1.5, 3.0, 7.0])))
    needed = int(rng.integers(1, 25))
    window = boost_window(topics, flags.boost_positions, needed)
    near = {t.topic_id: feats[t.topic_id] for t in topics[:window]}
    full = boost(topics, feats, flags, NOW)[:needed]
    assert boost(topics, near, flags, NOW)[:needed] == full
    assert boost_window(topics, flags.boost_positions, None) == n
