"""What members cannot steer in the zone calibration (pure).

The normal threshold may be read from the questions members asked (``sidecar calibrate --basis
asked|auto``), and anyone who may ask may try to move it: a flood of copies of one vague
question, each with a counter, scoring just above abstain, would remove the cautious band; a
flood of questions that still match once their best topic is hidden would push normal up until
nothing is normal. So, before any score is read:

* each **asker** (an opaque id the forum sends with ``/v1/retrieve``; retrievals without one are
  one anonymous asker) counts at most :data:`PER_ASKER` questions, the newest;
* questions that are the same once digits, punctuation and case are set aside count once, and
  so do **near-duplicates** (embedding cosine at least :data:`NEAR_DUPLICATE`);
* the members' basis needs questions from at least ``SIDECAR_CALIBRATION_MIN_ASKERS`` askers.

Then the members' scores are **trimmed** (:data:`TRIM` of each end) before their percentile is
read, and a calibration's **move is bounded** (:func:`move_problems`): each threshold is placed
among the forum's own questions (its opening posts asked without their topic, which members
do not write), as the share of them scoring below it, and may move at most
``SIDECAR_CALIBRATION_MAX_MOVE`` points from the served calibration, and the normal threshold at
most ``SIDECAR_CALIBRATION_MAX_FROM_OWN`` points from the opening posts' own (or from the one a
person last approved past the bound) in all: by default no more than one run may move, so
weekly runs that each stay within their bound cannot add up to a drift. A move past either is
not applied but reported, for a person to approve. (The abstain threshold is always read from
the opening posts: members do not move it.)
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import numpy.typing as npt

PER_ASKER = 3  # questions counted per asker (the newest)
NEAR_DUPLICATE = 0.9  # cosine from which two questions count as one
TRIM = 0.05  # share of the members' scores set aside at each end
WINDOW_DAYS = 90  # members' questions older than this are not read
ANONYMOUS = ""  # the one asker of every retrieval stored without an asker id
_NOT_WORDS = re.compile(r"[\W\d_]+")


@dataclass(frozen=True, slots=True)
class MemberQuestion:
    """A question a member asked through ``/v1/retrieve`` (a stored standalone query)."""

    text: str
    asker: str | None
    asked_at: datetime


def skeleton(text: str) -> str:
    """A question with digits, punctuation and case set aside: what a counter cannot change."""
    return " ".join(_NOT_WORDS.sub(" ", text.lower()).split())


def per_asker(questions: Sequence[MemberQuestion],
              limit: int = PER_ASKER) -> list[MemberQuestion]:
    """At most ``limit`` questions per asker and one per skeleton, newest first."""
    ordered = sorted(questions, key=lambda q: q.asked_at, reverse=True)
    counts: dict[str, int] = {}
    seen: set[str] = set()
    kept: list[MemberQuestion] = []
    for q in ordered:
        who, shape = q.asker or ANONYMOUS, skeleton(q.text)
        if not shape or shape in seen or counts.get(who, 0) >= limit:
            continue
        seen.add(shape)
        counts[who] = counts.get(who, 0) + 1
        kept.append(q)
    return kept


def distinct(vectors: npt.NDArray[np.floating], threshold: float = NEAR_DUPLICATE) -> list[int]:
    """Indexes of the rows to keep, in order, each at cosine below ``threshold`` to every row
    kept before it (the rows are unit vectors)."""
    kept: list[int] = []
    for i in range(len(vectors)):
        if not kept or float(np.max(vectors[kept] @ vectors[i])) < threshold:
            kept.append(i)
    return kept


def askers(questions: Sequence[MemberQuestion]) -> int:
    """Distinct askers (every retrieval without an asker id is one anonymous asker)."""
    return len({q.asker or ANONYMOUS for q in questions})


def trimmed(values: npt.NDArray[np.float64], share: float = TRIM) -> npt.NDArray[np.float64]:
    """``values`` sorted, without ``share`` of them at each end."""
    ordered = np.sort(values)
    cut = int(len(ordered) * share)
    return ordered[cut:len(ordered) - cut] if cut else ordered


def position(own: Sequence[float], threshold: float) -> float:
    """Where ``threshold`` sits among the forum's own questions' scores: the percentage
    below it."""
    values = np.asarray(own, dtype=np.float64)
    return float(100.0 * np.mean(values < threshold)) if len(values) else 0.0


@dataclass(frozen=True, slots=True)
class Bounds:
    """How far one calibration may move its thresholds, in percentage points of the forum's own
    questions (``SIDECAR_CALIBRATION_MAX_MOVE``, ``SIDECAR_CALIBRATION_MAX_FROM_OWN``)."""

    max_move: float = 10.0
    # The total from the opening posts' own: no more than one run may move, or runs that each
    # stay within max_move would add up (p80 -> 72 -> 62 -> 53 over three weeks).
    max_from_own: float = 10.0


def move_problems(own: Sequence[float], *, abstain: float, normal: float, normal_pct: float,
                  served: tuple[float, float] | None, approved_normal: float | None,
                  bounds: Bounds) -> list[str]:
    """Why a calibration (``abstain``, ``normal``) moves too far to be applied without a
    person: from the ``served`` thresholds (abstain, normal) of the same scorer, and the normal
    threshold from the opening posts' own (``normal_pct`` of ``own``) or, once a person
    approved one past the bound, from ``approved_normal``. Empty when within bounds."""
    problems: list[str] = []
    if served is not None:
        for name, new, old in (("abstain", abstain, served[0]), ("normal", normal, served[1])):
            move = abs(position(own, new) - position(own, old))
            if move > bounds.max_move:
                problems.append(
                    f"the {name} threshold would move from {old:.4f} to {new:.4f}: "
                    f"{move:.0f} points of the forum's own questions, more than "
                    f"{bounds.max_move:g} (SIDECAR_CALIBRATION_MAX_MOVE)")
    anchor, what = ((position(own, approved_normal), "the one a person last approved")
                    if approved_normal is not None else (normal_pct, "the opening posts' own"))
    gap = abs(position(own, normal) - anchor)
    if gap > bounds.max_from_own:
        problems.append(
            f"the normal threshold {normal:.4f} sits at p{position(own, normal):.0f} of the "
            f"forum's own questions, {gap:.0f} points from {what} (p{anchor:.0f}), more than "
            f"{bounds.max_from_own:g} (SIDECAR_CALIBRATION_MAX_FROM_OWN)")
    return problems
