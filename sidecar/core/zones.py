"""Graduated answer zones from the best relevance score (design note 004, D8).

No single threshold separates in-domain from off-topic questions (the distributions overlap), so
there are three zones: ``normal`` (answer), ``cautious`` (answer, hedged, and log for review) and
``abstain`` (say so). Thresholds depend on the scorer: a cross-encoder's raw logits and a
bi-encoder's cosine live on different scales.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Zone(StrEnum):
    """What the assistant may do with the evidence."""

    NORMAL = "normal"
    CAUTIOUS = "cautious"
    ABSTAIN = "abstain"


class ScorerKind(StrEnum):
    """Where a relevance score comes from."""

    CROSS_ENCODER = "cross-encoder"
    BI_ENCODER = "bi-encoder"


@dataclass(frozen=True, slots=True)
class Thresholds:
    """``score < abstain`` abstains, ``score >= normal`` is normal, cautious in between."""

    abstain: float
    normal: float

    def __post_init__(self) -> None:
        if self.abstain > self.normal:
            raise ValueError(
                f"the abstain threshold ({self.abstain}) is above the normal one ({self.normal})"
            )


@dataclass(frozen=True, slots=True)
class ZoneDecision:
    """A zone and a sentence saying why."""

    zone: Zone
    reason: str


def decide_zone(kind: ScorerKind, best: float | None, thresholds: Thresholds) -> ZoneDecision:
    """The zone of a retrieval whose best evidence scored ``best`` (None: nothing was found)."""
    if best is None:
        return ZoneDecision(Zone.ABSTAIN, "no public post matched the query")
    label = f"{kind.value} score {best:.4g}"
    if best < thresholds.abstain:
        return ZoneDecision(Zone.ABSTAIN, f"{label} < abstain threshold {thresholds.abstain:g}")
    if best >= thresholds.normal:
        return ZoneDecision(Zone.NORMAL, f"{label} >= normal threshold {thresholds.normal:g}")
    return ZoneDecision(
        Zone.CAUTIOUS,
        f"{label} in [{thresholds.abstain:g}, {thresholds.normal:g}): cautious",
    )
