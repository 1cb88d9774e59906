"""Knee cut-off: how many evidence items to keep, from where the relevance scores fall off.

Kneedle (Satopää et al., 2011) on the scores sorted best first: with ranks and scores both
min-max normalised to [0, 1], the knee is the point farthest below the straight line from the
best score to the worst. It is a knee only when that distance reaches ``sensitivity`` (a
straight decline or a flat band has none, and then nothing is cut). Scale-free, so it reads a
cross-encoder's logits and a bi-encoder's cosines alike.

Measured elsewhere (seed 002): bi-encoder cosines of contextual embeddings can sit in a narrow
band with no usable elbow, which is why a cut needs a minimum distance and a minimum count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True, slots=True)
class KneeCut:
    """How many leading items to keep, and why."""

    kept: int
    of: int  # items before the cut (the evidence limit, or fewer candidates)
    threshold: float | None  # the last score above the knee; None when nothing was cut
    distance: float  # the knee's normalised distance below the chord (0 without a knee)

    def as_dict(self) -> dict[str, Any]:
        """JSON form, for the trace."""
        return {"kept": self.kept, "of": self.of,
                "threshold": None if self.threshold is None else round(self.threshold, 6),
                "distance": round(self.distance, 4)}


def knee_index(sorted_scores: Sequence[float]) -> tuple[int, float]:
    """(items before the knee, its distance below the chord) for scores sorted best first.

    (len, 0.0) when there are fewer than three scores or no point lies below the chord.
    """
    y = np.asarray(sorted_scores, dtype=np.float64)
    n = y.size
    if n < 3 or float(y[0] - y[-1]) <= 0.0:
        return n, 0.0
    x = np.arange(n, dtype=np.float64) / (n - 1)
    y_norm = (y - y[-1]) / (y[0] - y[-1])
    distance = (1.0 - x) - y_norm
    # Index i >= 1: the first item after the fall, so i items are kept.
    i = int(np.argmax(distance[1:])) + 1
    return (i, float(distance[i])) if distance[i] > 0.0 else (n, 0.0)


def knee_cut(
    scores: Sequence[float | None], *, limit: int, min_items: int, sensitivity: float
) -> KneeCut:
    """The number of leading items (at most ``limit``) to keep, given every candidate's score.

    ``scores`` are in the order the items are shown (the first ``limit`` are the evidence); the
    knee is found on all of them sorted, which gives the curve more points than the evidence
    budget alone. Items up to the last one whose score is at or above the knee's are kept, at
    least ``min_items``. A missing score (None) is never cut below.
    """
    shown = list(scores[:limit])
    of = len(shown)
    valid = sorted((s for s in scores if s is not None), reverse=True)
    kept_sorted, distance = knee_index(valid)
    if distance < sensitivity or distance <= 0.0 or kept_sorted >= len(valid):
        return KneeCut(kept=of, of=of, threshold=None, distance=max(distance, 0.0))
    threshold = valid[kept_sorted - 1]
    last = max((i for i, s in enumerate(shown) if s is None or s >= threshold), default=-1)
    kept = min(of, max(min_items, last + 1))
    return KneeCut(kept=kept, of=of, threshold=threshold, distance=distance)
