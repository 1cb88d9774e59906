"""Retrieval metrics and paired comparisons: pure functions, no I/O.

Conventions (see docs/evaluation.md):

- a *ranking* is a sequence of document ids, best first; ids may be topics or posts;
- *qrels* map a document id to a graded judgement (0 = not relevant, 1 = relevant, 2 = highly
  relevant); an unjudged id counts as 0, as in the open-corpus protocol;
- a document is *relevant* when its grade is at least ``min_grade`` (1 by default).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Qrels = Mapping[int, int]


def first_relevant_rank(ranking: Sequence[int], qrels: Qrels, min_grade: int = 1) -> int | None:
    """1-based rank of the first relevant document, or None when none is ranked."""
    for rank, doc in enumerate(ranking, start=1):
        if qrels.get(doc, 0) >= min_grade:
            return rank
    return None


def hit_at(ranking: Sequence[int], qrels: Qrels, k: int, min_grade: int = 1) -> float:
    """1.0 when a relevant document is among the first ``k``, else 0.0."""
    rank = first_relevant_rank(ranking[:k], qrels, min_grade)
    return 1.0 if rank is not None else 0.0


def reciprocal_rank(ranking: Sequence[int], qrels: Qrels, k: int, min_grade: int = 1) -> float:
    """1 / rank of the first relevant document within the first ``k`` (0.0 if there is none).

    Averaged over queries this is MRR@k.
    """
    rank = first_relevant_rank(ranking[:k], qrels, min_grade)
    return 1.0 / rank if rank is not None else 0.0


def dcg(gains: Sequence[float]) -> float:
    """Discounted cumulative gain: sum of gain_i / log2(i + 1), i 1-based."""
    return sum(g / math.log2(i + 1) for i, g in enumerate(gains, start=1))


def ndcg_at(ranking: Sequence[int], qrels: Qrels, k: int) -> float:
    """nDCG@k with graded, linear gains (gain = grade, as trec_eval's ``ndcg_cut``).

    The ideal ranking sorts every judged document of the query by grade, so a relevant document
    the system never retrieved still lowers the score. A query without any positive grade has no
    ideal gain; it scores 0.0 (the runner only averages over queries with a relevant document).
    """
    ideal = dcg(sorted((float(g) for g in qrels.values() if g > 0), reverse=True)[:k])
    if ideal <= 0.0:
        return 0.0
    seen: set[int] = set()
    gains: list[float] = []
    for doc in ranking[:k]:
        # A document listed twice gains once: a buggy ranking must not beat the ideal.
        gains.append(0.0 if doc in seen else float(max(qrels.get(doc, 0), 0)))
        seen.add(doc)
    return dcg(gains) / ideal


def average_precision(
    ranking: Sequence[int], qrels: Qrels, k: int | None = None, min_grade: int = 1
) -> float:
    """Average precision as SemEval-2016 Task 3's official scorer computes it.

    The mean, over the relevant documents found within the first ``k`` (all when None), of the
    precision at their rank; 0.0 when none is found. The scorer divides by the relevant documents
    *retrieved*, not by all relevant ones: in protocol B every candidate is ranked, so both agree.
    """
    found = 0
    precisions: list[float] = []
    for rank, doc in enumerate(ranking[:k] if k is not None else ranking, start=1):
        if qrels.get(doc, 0) >= min_grade:
            found += 1
            precisions.append(found / rank)
    return sum(precisions) / len(precisions) if precisions else 0.0


def mean(values: Sequence[float]) -> float:
    """Arithmetic mean; 0.0 for an empty sequence."""
    return float(sum(values) / len(values)) if values else 0.0


@dataclass(frozen=True)
class PairedComparison:
    """A system against a baseline on the same queries."""

    n: int
    wins: int  # queries where the system scores higher
    losses: int  # queries where the baseline scores higher
    ties: int
    mean_diff: float  # mean of (system - baseline)
    ci_low: float
    ci_high: float
    confidence: float
    resamples: int
    seed: int

    @property
    def significant(self) -> bool:
        """True when the confidence interval excludes zero."""
        return self.ci_low > 0.0 or self.ci_high < 0.0


def wins_losses(
    system: Sequence[float], baseline: Sequence[float], tol: float = 1e-12
) -> tuple[int, int, int]:
    """(wins, losses, ties) of ``system`` over ``baseline``, query by query."""
    if len(system) != len(baseline):
        raise ValueError("both systems must be scored on the same queries")
    wins = sum(1 for s, b in zip(system, baseline, strict=True) if s - b > tol)
    losses = sum(1 for s, b in zip(system, baseline, strict=True) if b - s > tol)
    return wins, losses, len(system) - wins - losses


def paired_bootstrap_ci(
    system: Sequence[float],
    baseline: Sequence[float],
    *,
    resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
    weights: Sequence[float] | None = None,
) -> tuple[float, float, float]:
    """(mean difference, low, high): percentile bootstrap CI of the mean paired difference.

    Queries are resampled with replacement ``resamples`` times (the same resample for both
    systems, hence *paired*); the interval is the central ``confidence`` share of the resampled
    means. With ``weights`` the means are weighted (e.g. inverse propensities of clicks).
    Deterministic for a given seed.
    """
    if len(system) != len(baseline):
        raise ValueError("both systems must be scored on the same queries")
    if not 0.0 < confidence < 1.0:
        raise ValueError("confidence must be between 0 and 1")
    if resamples < 1:
        raise ValueError("resamples must be >= 1")
    diffs = np.asarray(system, dtype=np.float64) - np.asarray(baseline, dtype=np.float64)
    if diffs.size == 0:
        return 0.0, 0.0, 0.0
    w = (np.ones_like(diffs) if weights is None
         else np.asarray(weights, dtype=np.float64))
    if w.shape != diffs.shape or (w < 0).any() or w.sum() <= 0:
        raise ValueError("weights must be one non-negative number per query, not all 0")
    rng = np.random.default_rng(seed)
    means = np.empty(resamples, dtype=np.float64)
    # In chunks: 10,000 x n indices at once would be fine for n ~ 100, but not for n ~ 100,000.
    chunk = max(1, 2_000_000 // diffs.size)
    for start in range(0, resamples, chunk):
        stop = min(resamples, start + chunk)
        idx = rng.integers(0, diffs.size, size=(stop - start, diffs.size))
        if weights is None:
            means[start:stop] = diffs[idx].mean(axis=1)
        else:
            picked = w[idx]
            means[start:stop] = (diffs[idx] * picked).sum(axis=1) / np.maximum(
                picked.sum(axis=1), 1e-300)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    mean_diff = diffs.mean() if weights is None else (diffs * w).sum() / w.sum()
    return float(mean_diff), float(low), float(high)


def compare(
    system: Sequence[float],
    baseline: Sequence[float],
    *,
    resamples: int = 10_000,
    confidence: float = 0.95,
    seed: int = 0,
    weights: Sequence[float] | None = None,
) -> PairedComparison:
    """Wins, losses and the paired bootstrap CI of the (weighted) mean difference."""
    wins, losses, ties = wins_losses(system, baseline)
    diff, low, high = paired_bootstrap_ci(system, baseline, resamples=resamples,
                                          confidence=confidence, seed=seed, weights=weights)
    return PairedComparison(n=len(system), wins=wins, losses=losses, ties=ties, mean_diff=diff,
                            ci_low=low, ci_high=high, confidence=confidence,
                            resamples=resamples, seed=seed)


def redundancy(vectors: Sequence[npt.ArrayLike]) -> float | None:
    """Intra-list redundancy: the mean cosine over every pair of vectors (None under two)."""
    if len(vectors) < 2:
        return None
    unit = np.stack([np.asarray(v, dtype=np.float64) for v in vectors])
    unit /= np.where((n := np.linalg.norm(unit, axis=1, keepdims=True)) > 0, n, 1.0)
    sims = unit @ unit.T
    count = len(vectors)
    return float((sims.sum() - np.trace(sims)) / (count * (count - 1)))
