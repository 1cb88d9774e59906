"""Zone thresholds suggested by moderators' labels (pure).

Moderators label abstain and cautious retrievals: ``correct_abstention`` (nothing on the forum
answers it), ``should_have_answered`` (the forum had the answer, in the topic they name) or
``wrong_evidence`` (the evidence shown was not about the question). For each scorer (a
cross-encoder's logits and a bi-encoder's cosines live on different scales) this module suggests

* an **abstain** threshold that best separates ``correct_abstention`` (should fall below it) from
  ``should_have_answered`` (should reach it);
* a **normal** threshold that best separates answers that could have been given with confidence
  (``should_have_answered`` whose right topic was the first evidence item) from those that should
  not (``wrong_evidence`` and ``correct_abstention``).

"Best" minimises the balanced error rate (the mean of both sides' error rates, so that a pile of
labels of one kind does not drown the other); ties go to the threshold closest to the configured
one, so that a handful of labels moves nothing it does not have to. A side without labels gives
no suggestion and the configured threshold stays. The report then counts how many stored
retrievals of that scorer would change zone under the suggested thresholds.

The zone rule mirrors ``sidecar.core.zones.decide_zone``: ``score < abstain`` abstains,
``score >= normal`` is normal, cautious in between.
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from sidecar.core.zones import ScorerKind, Thresholds

LABELS = ("correct_abstention", "should_have_answered", "wrong_evidence")
Label = Literal["correct_abstention", "should_have_answered", "wrong_evidence"]
ZONES = ("abstain", "cautious", "normal")


@dataclass(frozen=True, slots=True)
class LabelledScore:
    """One labelled retrieval: its best score, its label, and whether the right topic led."""

    score: float | None
    label: str
    right_at_top: bool = False


@dataclass(frozen=True, slots=True)
class Split:
    """The threshold suggested for one boundary, with the counts behind it.

    ``below``/``above`` count the labels of each side below and at-or-above the suggested
    threshold (``low`` labels belong below it, ``high`` labels at or above it).
    """

    boundary: Literal["abstain", "normal"]
    configured: float
    suggested: float | None
    low_label: str
    high_label: str
    low_below: int = 0
    low_above: int = 0
    high_below: int = 0
    high_above: int = 0
    error_configured: float | None = None  # balanced error rate at the configured threshold
    error_suggested: float | None = None
    note: str = ""

    @property
    def threshold(self) -> float:
        """The suggestion, or the configured threshold when there is none."""
        return self.configured if self.suggested is None else self.suggested


@dataclass(slots=True)
class ScorerReport:
    """Calibration of one scorer."""

    scorer: str
    kind: ScorerKind
    configured: Thresholds
    suggested: Thresholds
    abstain: Split
    normal: Split
    labels: dict[str, int]
    unscored_labels: int
    scored_retrievals: int
    zone_changes: dict[str, int] = field(default_factory=dict)  # "abstain→cautious": n

    @property
    def changed(self) -> int:
        """Stored retrievals whose zone would change under the suggested thresholds."""
        return sum(self.zone_changes.values())


def scorer_kind(scorer: str) -> ScorerKind | None:
    """``cross-encoder:<name>`` / ``bi-encoder:<name>`` → its kind; None for anything else."""
    prefix = scorer.split(":", 1)[0]
    try:
        return ScorerKind(prefix)
    except ValueError:
        return None


def zone_of(score: float, thresholds: Thresholds) -> str:
    """The zone of a score (the rule of ``decide_zone``)."""
    if score < thresholds.abstain:
        return "abstain"
    if score >= thresholds.normal:
        return "normal"
    return "cautious"


def _balanced_error(low: list[float], high: list[float], t: float) -> float:
    low_wrong = len(low) - bisect.bisect_left(low, t)  # low labels at or above t
    high_wrong = bisect.bisect_left(high, t)  # high labels below t
    return (low_wrong / len(low) + high_wrong / len(high)) / 2


def best_threshold(low: Iterable[float], high: Iterable[float], configured: float
                   ) -> float | None:
    """The threshold ``t`` (``low`` should be ``< t``, ``high`` ``>= t``) with the least
    balanced error; ties go to the one closest to ``configured``. None if a side is empty."""
    lows, highs = sorted(low), sorted(high)
    if not lows or not highs:
        return None
    values = sorted(set(lows) | set(highs))
    candidates = {configured, values[0], math.nextafter(values[-1], math.inf)}
    candidates.update((a + b) / 2 for a, b in itertools.pairwise(values))
    return min(candidates, key=lambda t: (round(_balanced_error(lows, highs, t), 12),
                                          abs(t - configured), t))


def _split(boundary: Literal["abstain", "normal"], configured: float, low: list[float],
           high: list[float], low_label: str, high_label: str) -> Split:
    """Suggest one boundary; counts are taken at the suggestion (or the configured value)."""
    suggested = best_threshold(low, high, configured)
    t = configured if suggested is None else suggested
    lows, highs = sorted(low), sorted(high)
    note = ""
    if suggested is None:
        missing = low_label if not low else high_label
        note = f"no {missing} label with a score yet: keeping the configured value"
    both = bool(lows and highs)
    return Split(
        boundary, configured, None if suggested is None else round(suggested, 4),
        low_label, high_label,
        low_below=bisect.bisect_left(lows, t), low_above=len(lows) - bisect.bisect_left(lows, t),
        high_below=bisect.bisect_left(highs, t),
        high_above=len(highs) - bisect.bisect_left(highs, t),
        error_configured=round(_balanced_error(lows, highs, configured), 4) if both else None,
        error_suggested=round(_balanced_error(lows, highs, t), 4) if both else None,
        note=note,
    )


def calibrate_scorer(
    scorer: str,
    kind: ScorerKind,
    configured: Thresholds,
    labelled: Sequence[LabelledScore],
    stored_scores: Iterable[float],
) -> ScorerReport:
    """Suggested thresholds for one scorer and the zone changes they would cause."""
    scored = [x for x in labelled if x.score is not None and math.isfinite(x.score)]
    by = {lab: [float(x.score) for x in scored if x.label == lab]  # type: ignore[arg-type]
          for lab in LABELS}
    abstain = _split("abstain", configured.abstain, by["correct_abstention"],
                     by["should_have_answered"], "correct_abstention", "should_have_answered")
    confident = [float(x.score) for x in scored  # type: ignore[arg-type]
                 if x.label == "should_have_answered" and x.right_at_top]
    normal = _split("normal", configured.normal, by["wrong_evidence"] + by["correct_abstention"],
                    confident, "wrong_evidence or correct_abstention",
                    "should_have_answered (right topic first)")
    a, n = abstain.threshold, normal.threshold
    if a > n:
        n = a
        normal = _with_note(normal, "raised to the abstain threshold: no cautious band left")
    suggested = Thresholds(abstain=a, normal=n)
    changes: Counter[str] = Counter()
    total = 0
    for score in stored_scores:
        if not math.isfinite(score):
            continue
        total += 1
        before, after = zone_of(score, configured), zone_of(score, suggested)
        if before != after:
            changes[f"{before}→{after}"] += 1
    counts = Counter(x.label for x in labelled)
    return ScorerReport(
        scorer=scorer, kind=kind, configured=configured, suggested=suggested,
        abstain=abstain, normal=normal,
        labels={lab: counts.get(lab, 0) for lab in LABELS},
        unscored_labels=len(labelled) - len(scored), scored_retrievals=total,
        zone_changes=dict(sorted(changes.items())),
    )


def _with_note(split: Split, note: str) -> Split:
    fields = {name: getattr(split, name) for name in Split.__dataclass_fields__}
    fields["note"] = f"{split.note}; {note}" if split.note else note
    return Split(**fields)
