"""What members cannot steer in the zone calibration (pure): a few questions per asker, a
counter or a near-duplicate counts once, trimmed scores, and a bounded move."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from sidecar.config.settings import Settings
from sidecar.core.answerability import calibrate
from sidecar.core.zone_guard import (
    PER_ASKER,
    Bounds,
    MemberQuestion,
    askers,
    distinct,
    move_problems,
    per_asker,
    position,
    skeleton,
    trimmed,
)

NOW = datetime(2026, 12, 6, tzinfo=UTC)
OWN = [i / 100 for i in range(30, 90)]  # the opening posts' scores: 0.30 ... 0.89
BOUNDS = Bounds(max_move=10, max_from_own=30)


def asked(text: str, asker: str | None, minutes_ago: int = 0) -> MemberQuestion:
    return MemberQuestion(text=text, asker=asker, asked_at=NOW - timedelta(minutes=minutes_ago))


def test_a_counter_does_not_make_a_question_new() -> None:
    assert skeleton("How do I fix it? #17") == skeleton("how do i fix it (18)") == \
        "how do i fix it"
    flood = [asked(f"Is my setup fine? {i}", f"asker-{i}", i) for i in range(150)]
    assert len(per_asker(flood)) == 1  # 150 askers, one question


def test_one_asker_counts_a_few_questions_the_newest() -> None:
    mine = [asked(f"question about topic {w}", "one-asker", i)
            for i, w in enumerate(["alpha", "beta", "gamma", "delta", "epsilon"])]
    kept = per_asker(mine)
    assert [q.text for q in kept] == [q.text for q in mine[:PER_ASKER]]
    # Every retrieval without an asker id is one anonymous asker, capped alike.
    anonymous = [asked(f"question number {w}", None, i) for i, w in enumerate("abcdefgh")]
    assert len(per_asker(anonymous)) == PER_ASKER and askers(anonymous) == 1
    assert askers([asked("a b", "x"), asked("c d", "y"), asked("e f", None)]) == 3


def test_near_duplicates_count_once() -> None:
    rng = np.random.default_rng(0)
    base = rng.standard_normal(16)
    near = [base + 0.05 * rng.standard_normal(16) for _ in range(20)]
    other = rng.standard_normal(16)
    vectors = np.array([*near, other])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    assert distinct(vectors) == [0, 20]
    assert distinct(vectors, threshold=1.01) == list(range(21))  # nothing is that close


def test_trimmed_scores_ignore_a_few_extremes() -> None:
    members = [0.5 + i / 1000 for i in range(40)]
    cal = calibrate(OWN, scorer="s", created_at="x", asked=members)
    # Two outliers at each end (5% of 40) move nothing.
    outliers = [*members[2:-2], 0.0, 0.0, 9.0, 9.0]
    assert calibrate(OWN, scorer="s", created_at="x", asked=outliers).normal == cal.normal
    assert list(trimmed(np.array([5.0, 1.0, 3.0]), 0.0)) == [1.0, 3.0, 5.0]


def test_a_move_within_the_bounds_is_applied() -> None:
    assert position(OWN, 0.78) == pytest.approx(80.0)
    assert move_problems(OWN, abstain=0.36, normal=0.75, normal_pct=80, served=(0.36, 0.78),
                         approved_normal=None, bounds=BOUNDS) == []
    # No calibration served yet: only the distance from the opening posts' own is bounded.
    assert move_problems(OWN, abstain=0.36, normal=0.60, normal_pct=80, served=None,
                         approved_normal=None, bounds=BOUNDS) == []


def test_a_move_past_a_bound_is_reported() -> None:
    """The review's attack: normal pulled down to just above abstain (no cautious band), or up
    past every question of the forum's own (nothing normal)."""
    down = move_problems(OWN, abstain=0.36, normal=0.37, normal_pct=80, served=(0.36, 0.78),
                         approved_normal=None, bounds=BOUNDS)
    assert len(down) == 2
    assert "normal threshold would move from 0.7800 to 0.3700" in down[0]
    assert "SIDECAR_CALIBRATION_MAX_FROM_OWN" in down[1]
    up = move_problems(OWN, abstain=0.36, normal=0.95, normal_pct=80, served=None,
                       approved_normal=None, bounds=BOUNDS)
    assert len(up) == 0  # p100 is 20 points from p80: within 30 ...
    assert move_problems(OWN, abstain=0.36, normal=0.95, normal_pct=80, served=(0.36, 0.78),
                         approved_normal=None, bounds=BOUNDS)  # ... but not in one step
    abstain = move_problems(OWN, abstain=0.50, normal=0.78, normal_pct=80, served=(0.36, 0.78),
                            approved_normal=None, bounds=BOUNDS)
    assert len(abstain) == 1 and abstain[0].startswith("the abstain threshold")


def test_what_a_person_approved_anchors_the_next_calibrations() -> None:
    # A person approved normal at 0.55 (p25 of the forum's own): the next week's calibration
    # near it is applied, though it sits 55 points from the opening posts' own p80.
    assert move_problems(OWN, abstain=0.36, normal=0.56, normal_pct=80, served=(0.36, 0.55),
                         approved_normal=0.55, bounds=BOUNDS) == []
    assert move_problems(OWN, abstain=0.36, normal=0.56, normal_pct=80, served=(0.36, 0.55),
                         approved_normal=None, bounds=BOUNDS)


def test_weekly_runs_cannot_drift_further_than_one_run_may_move() -> None:
    """The review's drift: each weekly run moves normal less than its bound (p80 -> 72 -> 63
    -> 55 of the forum's own), so no single run is stopped, yet three runs together would carry
    it 25 points from the opening posts' own. With the served bounds, the total from the opening
    posts' p80 is held to what one run may move: past it, a person approves."""
    fields = Settings.model_fields
    bounds = Bounds(max_move=fields["calibration_max_move"].default,
                    max_from_own=fields["calibration_max_from_own"].default)
    assert bounds.max_from_own <= bounds.max_move == Bounds().max_move
    served, applied, stopped = (0.36, 0.78), [], []
    for normal in (0.725, 0.675, 0.625):  # p71.7, p63.3, p55 of OWN: 8.3 points a week
        problems = move_problems(OWN, abstain=0.36, normal=normal, normal_pct=80,
                                 served=served, approved_normal=None, bounds=bounds)
        if problems:
            stopped.append(problems)
        else:
            served = (0.36, normal)
            applied.append(normal)
    assert applied == [0.725]
    # The second week is within one run's move of the first, but not of the opening posts'.
    assert stopped and all(any("SIDECAR_CALIBRATION_MAX_FROM_OWN" in p for p in problems)
                           for problems in stopped)
    assert not [p for p in stopped[0] if "SIDECAR_CALIBRATION_MAX_MOVE" in p]
    assert abs(position(OWN, served[1]) - 80) <= bounds.max_from_own
