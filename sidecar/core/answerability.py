"""Zone thresholds calibrated on the forum itself, before anyone labels anything (pure).

A fixed cosine threshold that means "answer" on one forum means "unsure" on another: scores
depend on the model, the forum's subjects and how its members write. What a forum holds tells
where its scores sit when the answer is *not* there: its own opening posts, each asked as a
question of the forum without its own topic (hidden from both legs, as the evaluation's
leave-out does), are questions of the forum's subject that the rest of the forum does not
answer. Their best scores give

* the **normal** threshold: the ``normal_pct`` percentile of those scores (80 by default), so
  that about that share of in-domain questions the forum never answered get *cautious* or
  *abstain* rather than *normal*;
* the **abstain** threshold: the ``abstain_pct`` percentile (10 by default): below it a question
  is farther from the forum than nine in ten of its own questions are from each other, which
  is where off-topic questions fall.

Opening posts are not how members ask: on an FAQ they share their neighbours' words and score
far higher without their topic than members' questions do, so their 80th percentile held back
98% of unanswered questions and answered 9% of the answerable ones. Once the forum has been
asked enough (``sidecar calibrate --basis asked``), the **normal** threshold is read from the
questions its members asked instead, each re-asked without the topic that answered it best:
held out on three forums, p80 of those held back 73-79% and answered 43-64%
(docs/answerability.md). The abstain threshold stays on the opening posts: logged questions
include off-topic ones, which would pull it down. What members cannot steer (a few questions per
asker, near-duplicates once, trimmed scores, a bounded move) is :mod:`sidecar.core.zone_guard`.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from sidecar.core.evidence import passage
from sidecar.core.types import Leg, TopicHit
from sidecar.core.zone_guard import trimmed

# Quantiles kept with a calibration (every 5%): enough to draw its curve and to say how many
# of the forum's unanswered questions a threshold lets through.
QUANTILE_STEP = 5
MIN_QUESTIONS = 20
# What a normal threshold was read from: the forum's opening posts, or its members' questions.
CalibrationBasis = Literal["opening_posts", "asked"]


@dataclass(frozen=True, slots=True)
class ZoneCalibration:
    """Thresholds of one scorer, calibrated on ``questions`` of the forum's own questions."""

    scorer: str
    abstain: float
    normal: float
    abstain_pct: float
    normal_pct: float
    questions: int
    created_at: str
    quantiles: tuple[float, ...]  # the normal threshold's scores at 0, 5, ..., 100 %
    # What the normal threshold was read from: the forum's opening posts, or the questions its
    # members asked (``asked``), each re-asked without the topic that answered it best.
    basis: CalibrationBasis = "opening_posts"
    asked: int = 0  # members' questions behind the normal threshold (basis "asked")
    seed: int | None = None  # which opening posts were drawn (random per run unless given)
    # The normal threshold a person approved past the bound (``sidecar calibrate --approve``),
    # carried forward: later calibrations are held near it instead of the opening posts' own.
    approved_normal: float | None = None

    def share_above(self, threshold: float) -> float:
        """About how many of the forum's unanswered questions score ``threshold`` or more."""
        qs = self.quantiles
        if not qs:
            return 0.0
        i = bisect.bisect_left(qs, threshold)
        if i == 0:
            return 1.0
        if i >= len(qs):
            return 0.0
        lo, hi = qs[i - 1], qs[i]
        frac = (threshold - lo) / (hi - lo) if hi > lo else 1.0
        below = (i - 1 + frac) * QUANTILE_STEP / 100
        return round(max(0.0, min(1.0, 1.0 - below)), 4)

    def source(self) -> str:
        """How the zone reason names these thresholds."""
        if self.basis == "asked":
            return (f"calibrated on {self.asked} questions this forum's members asked and "
                    f"{self.questions} of its own ({self.created_at[:10]})")
        return (f"calibrated on {self.questions} of this forum's own questions "
                f"({self.created_at[:10]})")


def calibrate(scores: Sequence[float], *, scorer: str, created_at: str,
              abstain_pct: float = 10.0, normal_pct: float = 80.0,
              asked: Sequence[float] | None = None, seed: int | None = None,
              approved_normal: float | None = None) -> ZoneCalibration:
    """Thresholds from the best scores of the forum's own questions asked without their topic;
    with ``asked`` (the best scores of members' questions re-asked without the topic that
    answered them best), the normal threshold is read from those instead, trimmed
    (:func:`sidecar.core.zone_guard.trimmed`: a few extreme scores move nothing).

    Raises ValueError with fewer than :data:`MIN_QUESTIONS` finite scores (on either side) or
    bad percentiles, or when the members' questions put normal below abstain.
    """
    values = _finite(scores, "to calibrate (a forum with more topics that have a reply)")
    if not 0 <= abstain_pct < normal_pct <= 100:
        raise ValueError("percentiles must satisfy 0 <= abstain < normal <= 100")
    members = None if asked is None else _finite(asked, "asked to read the normal threshold "
                                                         "from them")
    normal_from = values if members is None else trimmed(members)
    abstain = round(float(np.percentile(values, abstain_pct)), 6)
    normal = round(float(np.percentile(normal_from, normal_pct)), 6)
    if normal < abstain:
        raise ValueError(f"the members' questions put normal ({normal}) below abstain "
                         f"({abstain})")
    quantiles = tuple(round(float(v), 6) for v in
                      np.percentile(normal_from, list(range(0, 101, QUANTILE_STEP))))
    return ZoneCalibration(
        scorer=scorer, abstain=abstain, normal=normal, abstain_pct=abstain_pct,
        normal_pct=normal_pct, questions=len(values), created_at=created_at,
        quantiles=quantiles, basis="opening_posts" if asked is None else "asked",
        asked=0 if members is None else len(members), seed=seed,
        approved_normal=approved_normal)


def _finite(scores: Sequence[float], what: str) -> npt.NDArray[np.float64]:
    values = np.array([s for s in scores if math.isfinite(s)], dtype=np.float64)
    if len(values) < MIN_QUESTIONS:
        raise ValueError(f"{len(values)} scored questions; at least {MIN_QUESTIONS} are needed "
                         f"{what}")
    return values


def top_keyword(topics: Sequence[TopicHit]) -> float:
    """The keyword leg's best score (BM25) among the topics found, 0 when it found none."""
    return max((p.leg_scores.get(Leg.KEYWORD, 0.0) for t in topics for p in t.posts),
               default=0.0)


@dataclass(frozen=True, slots=True)
class Combined:
    """A label-free answerability score: the similarity and the keyword leg's best score
    (log), each standardised on the forum's own calibration questions, summed with the keyword
    weighted by ``weight``.

    Measured, not served (docs/answerability.md): held out it separates answerable from
    leave-out questions better than the similarity on three forums (AUROC +0.03 to +0.04), but
    at the calibrated percentile it answers fewer answerable FAQ questions, whose opening posts
    share their neighbours' words far more than the members' questions do.
    """

    sim_mean: float
    sim_std: float
    kw_mean: float
    kw_std: float
    weight: float = 0.5

    @classmethod
    def fit(cls, similarity: Sequence[float], keyword: Sequence[float],
            weight: float = 0.5) -> Combined:
        """Standardise on the calibration questions' scores (pairs with a finite similarity)."""
        pairs = [(s, math.log1p(max(k, 0.0))) for s, k in zip(similarity, keyword, strict=True)
                 if math.isfinite(s)]
        if len(pairs) < 2:
            raise ValueError("at least two calibration questions are needed")
        sims, kws = np.array(pairs, dtype=np.float64).T
        return cls(float(sims.mean()), float(sims.std()) or 1.0, float(kws.mean()),
                   float(kws.std()) or 1.0, weight)

    def __call__(self, similarity: float, keyword: float) -> float:
        """The combined score of one question."""
        return ((similarity - self.sim_mean) / self.sim_std
                + self.weight * (math.log1p(max(keyword, 0.0)) - self.kw_mean) / self.kw_std)


def pseudo_question(title: str, text: str, max_chars: int) -> str:
    """An opening post asked as a member would: its title, then its words, cut to the limit."""
    return passage(f"{title} {text}", max_chars)
