"""K-fold cross-validation of a configuration choice (pure: arrays in, arrays out).

Every candidate configuration is scored on every judged query once. For each fold, the candidate
with the best weighted mean on the other folds is chosen and scored on the fold it never saw; the
held-out scores of all folds together estimate how the *tuning procedure* does on queries it was
not tuned on, which is the figure to trust (the in-sample best is optimistic by construction).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[np.float64]


def kfold(n: int, folds: int, seed: int = 0) -> list[list[int]]:
    """Query indices split into ``folds`` groups of near-equal size, shuffled by ``seed``."""
    if folds < 2:
        raise ValueError("cross-validation needs at least 2 folds")
    if n < folds:
        raise ValueError(f"{n} queries cannot be split into {folds} folds")
    order = np.random.default_rng(seed).permutation(n)
    return [sorted(int(i) for i in part) for part in np.array_split(order, folds)]


def weighted_means(scores: Array, weights: Array, idx: Sequence[int]) -> Array:
    """Weighted mean over the queries ``idx`` of each candidate's scores (candidates x queries)."""
    w = weights[list(idx)]
    return np.asarray(scores[:, list(idx)] @ w / w.sum(), dtype=np.float64)


def best_candidate(primary: Array, secondary: Array, weights: Array, idx: Sequence[int]) -> int:
    """Index of the candidate with the best weighted mean of ``primary`` on ``idx``; ties go to
    the better ``secondary``, then to the earlier candidate (the candidate list puts simpler
    configurations first)."""
    p = np.round(weighted_means(primary, weights, idx), 12)
    s = np.round(weighted_means(secondary, weights, idx), 12)
    best = 0
    for i in range(1, len(p)):
        if (p[i], s[i]) > (p[best], s[best]):
            best = i
    return best


def guarded_choice(primary: Array, secondary: Array, weights: Array, idx: Sequence[int],
                   anchor: int, *, resamples: int = 1000, seed: int = 0) -> int:
    """The best candidate on ``idx``, but only when it beats ``anchor`` (the untuned default)
    for sure on those queries: the lower bound of a 95% paired bootstrap interval of the mean
    difference above 0. Otherwise ``anchor``.

    With a hundred candidates and a hundred noisy queries, the best in-sample candidate is
    often best by luck (the winner's curse); requiring the win to be clear on the training
    queries keeps the default unless the judgements really argue for a change.
    """
    best = best_candidate(primary, secondary, weights, idx)
    if best == anchor:
        return anchor
    cols = list(idx)
    diff = primary[best, cols] - primary[anchor, cols]
    w = weights[cols]
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(cols), size=(resamples, len(cols)))
    means = (diff[draws] * w[draws]).sum(axis=1) / w[draws].sum(axis=1)
    return best if float(np.quantile(means, 0.025)) > 0 else anchor


@dataclass(frozen=True)
class CrossValidation:
    """Per-query held-out choice and the choice on all queries."""

    folds: list[list[int]]
    chosen: list[int]  # candidate chosen on the training part of each fold
    held_out: list[int]  # per query: the candidate that scored it (chosen without it)
    final: int  # candidate chosen on every query

    def held_out_scores(self, scores: Array) -> Array:
        """Each query's score under the candidate chosen without it."""
        return np.asarray([scores[c, q] for q, c in enumerate(self.held_out)], dtype=np.float64)


def cross_validate(primary: Array, secondary: Array, weights: Array, folds: list[list[int]],
                   anchor: int | None = None, *, seed: int = 0) -> CrossValidation:
    """Choose on k-1 folds, score on the k-th, for every fold; then choose on everything.

    With ``anchor`` the choice is :func:`guarded_choice` (move away from the anchor only on a
    clear win), else the plain best candidate.
    """
    def choose(idx: list[int]) -> int:
        if anchor is None:
            return best_candidate(primary, secondary, weights, idx)
        return guarded_choice(primary, secondary, weights, idx, anchor, seed=seed)

    n = primary.shape[1]
    held_out = [-1] * n
    chosen = []
    everything = list(range(n))
    for fold in folds:
        best = choose(sorted(set(everything) - set(fold)))
        chosen.append(best)
        for q in fold:
            held_out[q] = best
    return CrossValidation(folds=folds, chosen=chosen, held_out=held_out,
                           final=choose(everything))
