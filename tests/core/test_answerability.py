"""Zone thresholds calibrated on the forum's own questions (pure)."""

from __future__ import annotations

import math

import pytest

from sidecar.core.answerability import (
    MIN_QUESTIONS,
    Combined,
    calibrate,
    pseudo_question,
    top_keyword,
)
from sidecar.core.types import FusedPost, TopicHit

SCORES = [i / 100 for i in range(30, 90)]  # 60 questions scoring 0.30 ... 0.89


def test_thresholds_are_percentiles_of_the_unanswered_questions() -> None:
    cal = calibrate(SCORES, scorer="bi-encoder:m", created_at="2026-12-02T00:00:00+00:00")
    assert cal.abstain == pytest.approx(0.359, abs=1e-6)  # 10th percentile
    assert cal.normal == pytest.approx(0.772, abs=1e-6)  # 80th percentile
    assert cal.questions == 60 and len(cal.quantiles) == 21
    # About a fifth of the forum's unanswered questions reach the normal threshold.
    assert cal.share_above(cal.normal) == pytest.approx(0.2, abs=0.02)
    assert cal.share_above(0.0) == 1.0 and cal.share_above(2.0) == 0.0
    assert cal.source() == "calibrated on 60 of this forum's own questions (2026-12-02)"


def test_other_percentiles_and_refusals() -> None:
    cal = calibrate(SCORES, scorer="s", created_at="x", abstain_pct=5, normal_pct=50)
    assert cal.normal == pytest.approx(0.595, abs=1e-6)
    with pytest.raises(ValueError, match="at least"):
        calibrate(SCORES[: MIN_QUESTIONS - 1], scorer="s", created_at="x")
    with pytest.raises(ValueError, match="percentiles"):
        calibrate(SCORES, scorer="s", created_at="x", abstain_pct=80, normal_pct=50)
    # Non-finite scores are not counted.
    with pytest.raises(ValueError, match="at least"):
        calibrate([float("nan")] * 50, scorer="s", created_at="x")


def test_share_above_falls_as_the_threshold_rises() -> None:
    cal = calibrate(SCORES, scorer="s", created_at="x")
    shares = [cal.share_above(t / 100) for t in range(25, 95)]
    assert shares == sorted(shares, reverse=True)


def test_a_pseudo_question_is_the_title_then_the_words_cut_at_a_word() -> None:
    assert pseudo_question("Title", "some  words\nhere", 100) == "Title some words here"
    long = pseudo_question("Title", "word " * 100, 42)
    assert len(long) <= 42 and not long.endswith(" ") and long.startswith("Title word")


def test_the_combination_standardises_on_the_calibration_questions() -> None:
    keyword = [math.expm1(2 + (i % 7) / 3) for i in range(len(SCORES))]
    combine = Combined.fit(SCORES, keyword, weight=0.5)
    combined = [combine(s, k) for s, k in zip(SCORES, keyword, strict=True)]
    # Each part has mean 0 and unit spread on the calibration questions: so has their mean sum.
    assert sum(combined) / len(combined) == pytest.approx(0.0, abs=1e-9)
    mid = (combine.sim_mean, math.expm1(combine.kw_mean))
    assert combine(*mid) == pytest.approx(0.0, abs=1e-9)
    # One standard deviation more similarity counts 1, one more of log keyword score 0.5.
    assert combine(mid[0] + combine.sim_std, mid[1]) == pytest.approx(1.0)
    assert combine(mid[0], math.expm1(combine.kw_mean + combine.kw_std)) == pytest.approx(0.5)
    assert combine(mid[0], -3.0) == combine(mid[0], 0.0)  # no keyword match is 0, never less
    with pytest.raises(ValueError, match="two"):
        Combined.fit([0.5, math.nan], [1.0, 1.0])


def test_top_keyword_reads_the_keyword_leg_only() -> None:
    posts = (FusedPost(1, 10, 0.9, {"semantic": 1}, {"semantic": 0.9}),
             FusedPost(2, 10, 0.5, {"keyword": 1}, {"keyword": 7.5}))
    assert top_keyword([TopicHit(10, 0.9, posts)]) == 7.5
    assert top_keyword([TopicHit(10, 0.9, posts[:1])]) == 0.0 and top_keyword([]) == 0.0


def test_the_normal_threshold_from_the_members_questions() -> None:
    members = [i / 100 for i in range(20, 60)]  # 40 questions scoring 0.20 ... 0.59
    cal = calibrate(SCORES, scorer="bi-encoder:m", created_at="2026-12-02T00:00:00+00:00",
                    asked=members)
    assert cal.abstain == pytest.approx(0.359, abs=1e-6)  # still the opening posts' p10
    # The members' p80 once 5% of their scores are set aside at each end (0.22 ... 0.57).
    assert cal.normal == pytest.approx(0.50, abs=1e-6)
    assert (cal.basis, cal.asked, cal.questions) == ("asked", 40, 60)
    assert cal.quantiles[0] == 0.22 and cal.quantiles[-1] == 0.57  # the members' scores
    assert cal.share_above(cal.normal) == pytest.approx(0.2, abs=0.02)
    assert cal.source() == ("calibrated on 40 questions this forum's members asked and 60 of "
                            "its own (2026-12-02)")
    with pytest.raises(ValueError, match="at least 20"):
        calibrate(SCORES, scorer="s", created_at="x", asked=members[:19])
    with pytest.raises(ValueError, match="below abstain"):
        calibrate(SCORES, scorer="s", created_at="x", asked=[0.1] * 30)
    plain = calibrate(SCORES, scorer="s", created_at="x")
    assert (plain.basis, plain.asked) == ("opening_posts", 0)
