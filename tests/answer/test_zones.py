"""Graduated zones: a pure function of scorer, best score and thresholds."""

from __future__ import annotations

import pytest

from sidecar.core.zones import ScorerKind, Thresholds, Zone, decide_zone

CE = Thresholds(abstain=-4.0, normal=0.0)
COS = Thresholds(abstain=0.35, normal=0.55)


@pytest.mark.parametrize(
    ("kind", "limits", "score", "zone"),
    [
        (ScorerKind.CROSS_ENCODER, CE, -7.5, Zone.ABSTAIN),
        (ScorerKind.CROSS_ENCODER, CE, -4.0001, Zone.ABSTAIN),
        (ScorerKind.CROSS_ENCODER, CE, -4.0, Zone.CAUTIOUS),  # abstain strictly below -4
        (ScorerKind.CROSS_ENCODER, CE, -0.5, Zone.CAUTIOUS),
        (ScorerKind.CROSS_ENCODER, CE, 0.0, Zone.NORMAL),  # normal from 0
        (ScorerKind.CROSS_ENCODER, CE, 6.2, Zone.NORMAL),
        (ScorerKind.BI_ENCODER, COS, 0.2, Zone.ABSTAIN),
        (ScorerKind.BI_ENCODER, COS, 0.35, Zone.CAUTIOUS),
        (ScorerKind.BI_ENCODER, COS, 0.549, Zone.CAUTIOUS),
        (ScorerKind.BI_ENCODER, COS, 0.55, Zone.NORMAL),
    ],
)
def test_zone_boundaries(kind: ScorerKind, limits: Thresholds, score: float, zone: Zone) -> None:
    decision = decide_zone(kind, score, limits)
    assert decision.zone is zone
    assert kind.value in decision.reason


def test_nothing_found_abstains() -> None:
    decision = decide_zone(ScorerKind.CROSS_ENCODER, None, CE)
    assert decision.zone is Zone.ABSTAIN
    assert "no public post" in decision.reason


def test_thresholds_out_of_order_are_refused() -> None:
    with pytest.raises(ValueError, match="above"):
        Thresholds(abstain=1.0, normal=0.0)
    same = Thresholds(abstain=0.5, normal=0.5)  # no cautious band is allowed
    assert decide_zone(ScorerKind.BI_ENCODER, 0.5, same).zone is Zone.NORMAL
    assert decide_zone(ScorerKind.BI_ENCODER, 0.49, same).zone is Zone.ABSTAIN
