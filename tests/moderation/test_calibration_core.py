"""Suggested thresholds from labels (pure)."""

from __future__ import annotations

import random

import pytest

from sidecar.core.calibration import (
    LabelledScore,
    best_threshold,
    calibrate_scorer,
    scorer_kind,
    zone_of,
)
from sidecar.core.zones import ScorerKind, Thresholds, decide_zone

CONFIGURED = Thresholds(abstain=-4.0, normal=0.0)


def test_zone_rule_is_the_pipelines() -> None:
    rng = random.Random(7)
    for _ in range(2000):
        score = rng.uniform(-8, 4) if rng.random() < 0.9 else rng.choice([-4.0, 0.0])
        assert zone_of(score, CONFIGURED) == decide_zone(
            ScorerKind.CROSS_ENCODER, score, CONFIGURED).zone.value


@pytest.mark.parametrize(("scorer", "kind"), [
    ("cross-encoder:mmarco", ScorerKind.CROSS_ENCODER),
    ("bi-encoder:all-minilm-l6-v2", ScorerKind.BI_ENCODER),
    ("none", None), ("bm25:x", None), ("", None),
])
def test_scorer_kind(scorer: str, kind: ScorerKind | None) -> None:
    assert scorer_kind(scorer) is kind


def test_a_clean_separation_is_split_in_the_middle() -> None:
    assert best_threshold([-7, -6, -5.5], [-3, -2], configured=-4.0) == -4.0  # configured fits
    assert best_threshold([-7, -6, -5.5], [-5, -2], configured=-4.0) == -5.25


def test_ties_go_to_the_configured_side_and_empty_sides_suggest_nothing() -> None:
    # Every threshold in (-3, -2] separates perfectly: the closest to -4 wins.
    assert best_threshold([-3.0], [-2.0], configured=-4.0) == -2.5
    assert best_threshold([], [-2.0], configured=-4.0) is None
    assert best_threshold([-3.0], [], configured=-4.0) is None


def test_balanced_error_does_not_let_the_majority_win() -> None:
    # 20 correct abstentions around -5, 2 answerable at -4.5 and -4.4: a plain error count
    # would sacrifice the two; the balanced rate keeps them answerable.
    low = [-5.0 - i * 0.01 for i in range(20)]
    assert best_threshold(low, [-4.5, -4.4], configured=-6.0) == pytest.approx(-4.75)


def test_report_counts_labels_and_zone_changes() -> None:
    labelled = [
        LabelledScore(-6.0, "correct_abstention"), LabelledScore(-5.0, "correct_abstention"),
        LabelledScore(-3.5, "correct_abstention"),  # cautious today, but should abstain
        LabelledScore(-4.5, "should_have_answered", right_at_top=True),
        LabelledScore(-1.0, "should_have_answered", right_at_top=False),
        LabelledScore(-2.0, "wrong_evidence"),
        LabelledScore(None, "correct_abstention"),  # gated: no score
    ]
    stored = [-7.0, -6.0, -5.0, -4.5, -3.5, -2.0, -1.0, 0.5, 3.0]
    report = calibrate_scorer("cross-encoder:x", ScorerKind.CROSS_ENCODER, CONFIGURED, labelled,
                              stored)
    assert report.labels == {"correct_abstention": 4, "should_have_answered": 2,
                             "wrong_evidence": 1}
    assert report.unscored_labels == 1
    assert report.scored_retrievals == len(stored)
    # abstain: correct_abstention {-6,-5,-3.5} vs should_have_answered {-4.5,-1}
    a = report.abstain
    assert a.suggested is not None and a.low_below + a.low_above == 3
    assert a.high_below + a.high_above == 2
    assert a.error_suggested is not None and a.error_configured is not None
    assert a.error_suggested <= a.error_configured
    # recount the zone changes independently
    expected = sum(zone_of(s, CONFIGURED) != zone_of(s, report.suggested) for s in stored)
    assert report.changed == expected
    assert sum(report.zone_changes.values()) == expected
    assert report.suggested.abstain <= report.suggested.normal


def test_no_labels_of_a_kind_keeps_the_configured_threshold() -> None:
    report = calibrate_scorer("bi-encoder:x", ScorerKind.BI_ENCODER,
                              Thresholds(abstain=0.35, normal=0.55),
                              [LabelledScore(0.2, "correct_abstention")], [0.1, 0.4, 0.9])
    assert report.abstain.suggested is None and "should_have_answered" in report.abstain.note
    assert report.suggested == Thresholds(abstain=0.35, normal=0.55)
    assert report.changed == 0 and report.zone_changes == {}


def test_abstain_above_normal_collapses_the_cautious_band() -> None:
    labelled = [LabelledScore(s, "correct_abstention") for s in (-1.0, 0.5, 1.0)] + [
        LabelledScore(2.0, "should_have_answered")]
    report = calibrate_scorer("cross-encoder:x", ScorerKind.CROSS_ENCODER, CONFIGURED, labelled,
                              [0.8, 1.5, 2.5])
    assert report.suggested.abstain == 1.5
    assert report.suggested.normal == 1.5
    assert "no cautious band" in report.normal.note
    assert report.zone_changes == {"normal→abstain": 1}
