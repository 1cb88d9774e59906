"""The knee cut-off of the evidence (pure)."""

from __future__ import annotations

import pytest

from sidecar.core.knee import knee_cut, knee_index


def cut(scores: list[float | None], limit: int = 6, min_items: int = 1,
        sensitivity: float = 0.3) -> int:
    return knee_cut(scores, limit=limit, min_items=min_items, sensitivity=sensitivity).kept


def test_a_clear_cliff_keeps_the_items_above_it() -> None:
    scores = [0.91, 0.90, 0.88, 0.31, 0.30, 0.29, 0.28, 0.27, 0.26, 0.25]
    assert knee_index(scores)[0] == 3
    assert cut(scores) == 3


def test_no_knee_in_a_straight_decline_or_a_flat_band() -> None:
    assert cut([1.0 - i / 20 for i in range(20)]) == 6
    assert cut([0.5] * 12) == 6
    assert cut([0.52, 0.51, 0.515, 0.5, 0.505, 0.49, 0.5], sensitivity=0.5) == 6


def test_scale_free_logits_and_cosines_cut_alike() -> None:
    cosines = [0.8, 0.78, 0.4, 0.39, 0.38, 0.37, 0.36, 0.35]
    logits = [s * 20 - 9 for s in cosines]  # a cross-encoder's scale, partly negative
    assert cut(cosines) == cut(logits) == 2


def test_min_items_and_limit_bound_the_cut() -> None:
    scores = [0.9, 0.2, 0.19, 0.18, 0.17, 0.16, 0.15, 0.14]
    assert cut(scores, min_items=1) == 1
    assert cut(scores, min_items=3) == 3
    assert cut(scores, limit=2, min_items=1) == 1
    assert cut([0.9, 0.8], limit=6) == 2  # too few points for a knee: keep everything


def test_sensitivity_decides_what_counts_as_a_knee() -> None:
    scores = [1.0, 0.8, 0.6, 0.45, 0.35, 0.3, 0.27, 0.25]  # a gentle curve
    assert cut(scores, sensitivity=0.05) < 6
    assert cut(scores, sensitivity=0.6) == 6


def test_unsorted_scores_keep_up_to_the_last_strong_item() -> None:
    # Bi-encoder evidence is in fused order: the knee threshold is found on the sorted scores,
    # the cut keeps every item up to the last one at or above it.
    scores = [0.85, 0.30, 0.88, 0.29, 0.28, 0.27, 0.26, 0.25, 0.24]
    assert cut(scores) == 3
    scores = [0.85, 0.30, None, 0.29, 0.28, 0.27, 0.26, 0.25, 0.24]
    assert cut(scores) == 3  # a missing score is never cut below


def test_the_cut_reports_itself() -> None:
    result = knee_cut([0.9, 0.88, 0.2, 0.19, 0.18, 0.17], limit=6, min_items=1,
                      sensitivity=0.3)
    assert result.as_dict() == {"kept": 2, "of": 6, "threshold": 0.88,
                                "distance": pytest.approx(result.distance, abs=1e-4)}
    assert result.distance > 0.3
    none = knee_cut([0.5, 0.5, 0.5], limit=6, min_items=1, sensitivity=0.3)
    assert none.threshold is None and none.kept == none.of == 3
