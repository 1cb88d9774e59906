"""Statistics of the answerability evaluation: AUROC with CIs, risk-coverage, a CV'd model."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler


class HasSignals(Protocol):
    """An asked question (``sidecar.evaluation.zones.Asked``)."""

    query_id: str
    signals: dict[str, float]


def auroc_ci(pos: Sequence[float], neg: Sequence[float], *, resamples: int = 2000,
             seed: int = 0, confidence: float = 0.95) -> dict[str, float]:
    """AUROC of a score that should be higher for ``pos``, with a percentile bootstrap CI
    (each side resampled on its own)."""
    p, n = np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64)
    y = np.r_[np.ones(len(p)), np.zeros(len(n))]
    point = float(roc_auc_score(y, np.r_[p, n]))
    rng = np.random.default_rng(seed)
    stats = []
    for _ in range(resamples):
        bp, bn = rng.choice(p, len(p)), rng.choice(n, len(n))
        if np.ptp(np.r_[bp, bn]) == 0:
            stats.append(0.5)
            continue
        stats.append(float(roc_auc_score(y, np.r_[bp, bn])))
    alpha = (1 - confidence) / 2
    return {"auroc": round(point, 4), "ci_low": round(float(np.quantile(stats, alpha)), 4),
            "ci_high": round(float(np.quantile(stats, 1 - alpha)), 4)}


def auroc_difference_ci(pos: Sequence[tuple[float, float]], neg: Sequence[tuple[float, float]],
                        *, resamples: int = 2000, seed: int = 0, confidence: float = 0.95
                        ) -> dict[str, float]:
    """AUROC of a first score minus that of a second, each question scored by both
    (``(first, second)`` per question), with a paired percentile bootstrap CI."""
    p, n = np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64)
    y = np.r_[np.ones(len(p)), np.zeros(len(n))]

    def diff(bp: np.ndarray, bn: np.ndarray) -> float:
        return float(roc_auc_score(y, np.r_[bp[:, 0], bn[:, 0]])
                     - roc_auc_score(y, np.r_[bp[:, 1], bn[:, 1]]))

    rng = np.random.default_rng(seed)
    stats = [diff(p[rng.integers(0, len(p), len(p))], n[rng.integers(0, len(n), len(n))])
             for _ in range(resamples)]
    alpha = (1 - confidence) / 2
    return {"difference": round(diff(p, n), 4),
            "ci_low": round(float(np.quantile(stats, alpha)), 4),
            "ci_high": round(float(np.quantile(stats, 1 - alpha)), 4)}


def risk_coverage(pos: Sequence[float], neg: Sequence[float], points: int = 21
                  ) -> list[dict[str, float]]:
    """Answer when score >= t: for thresholds at the pooled quantiles, the share of all
    questions answered (coverage) and the share of answered ones that had no answer here
    (risk), with the share of answerable ones answered."""
    p, n = np.asarray(pos, dtype=np.float64), np.asarray(neg, dtype=np.float64)
    pooled = np.r_[p, n]
    out = []
    for t in np.quantile(pooled, np.linspace(0, 1, points)):
        answered_p, answered_n = int((p >= t).sum()), int((n >= t).sum())
        answered = answered_p + answered_n
        out.append({"threshold": round(float(t), 6),
                    "coverage": round(answered / len(pooled), 4),
                    "risk": round(answered_n / answered, 4) if answered else 0.0,
                    "answerable_answered": round(answered_p / max(len(p), 1), 4)})
    return out


def cv_logistic(pos: Sequence[HasSignals], neg: Sequence[HasSignals],
                fold_of: Mapping[str, int], names: Sequence[str], seed: int = 0
                ) -> dict[str, Any]:
    """A logistic regression over ``names``, trained on the other folds' answerable and
    leave-out questions and scored on each fold's: held-out AUROC and the coefficients fitted
    on everything (standardised signals)."""
    rows = [(a, 1) for a in pos] + [(a, 0) for a in neg]
    x = np.array([[a.signals[k] for k in names] for a, _ in rows], dtype=np.float64)
    y = np.array([label for _, label in rows])
    folds = np.array([fold_of.get(a.query_id, 0) for a, _ in rows])
    held = np.zeros(len(rows))
    for f in sorted(set(folds.tolist())):
        train, test = folds != f, folds == f
        if len(set(y[train].tolist())) < 2:
            return {"auroc_held_out": None, "note": "a fold lacks one of the two sides"}
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
        model.fit(x[train], y[train])
        held[test] = model.predict_proba(x[test])[:, 1]
    final = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000)).fit(x, y)
    coef = final[-1].coef_[0]
    return {"auroc_held_out": round(float(roc_auc_score(y, held)), 4),
            "coefficients": {k: round(float(c), 4) for k, c in zip(names, coef, strict=True)},
            "seed": seed}
