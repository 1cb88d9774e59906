"""Before and after: two evaluation documents of one dump (the base model's, the tuned one's)
compared query by query, each difference with its paired bootstrap 95% CI.

The documents are those of ``sidecar eval`` (per-query metrics per configuration),
``sidecar eval --part zones`` (per-query signals per side, calibrated thresholds) and
``sidecar eval-related`` (per-query series per system); the same questions are asked of both
models, so every comparison resamples the same questions for both.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from sidecar.evaluation.metrics import compare
from sidecar.evaluation.zone_stats import auroc_ci, auroc_difference_ci

RETRIEVAL_METRICS = ("mrr@10", "hit@5", "post_hit@5", "post_hit@1")
RELATED_METRICS = ("mrr@10", "hit@5")


def _diff(after: Sequence[float], before: Sequence[float], resamples: int, seed: int
          ) -> dict[str, Any]:
    c = compare(list(after), list(before), resamples=resamples, seed=seed)
    return {"before": round(float(np.mean(before)), 4) if before else None,
            "after": round(float(np.mean(after)), 4) if after else None,
            "difference": round(c.mean_diff, 4), "ci": [round(c.ci_low, 4), round(c.ci_high, 4)],
            "significant": c.significant, "wins": c.wins, "losses": c.losses}


def retrieval(before: dict[str, Any], after: dict[str, Any], *, resamples: int, seed: int
              ) -> dict[str, Any]:
    """Per configuration present in both, each metric before and after with the CI."""
    out: dict[str, Any] = {}
    for config, rows in before["per_query"].items():
        if config not in after["per_query"]:
            continue
        theirs = {r["query_id"]: r for r in after["per_query"][config]}
        paired = [(r, theirs[r["query_id"]]) for r in rows if r["query_id"] in theirs]
        out[config] = {"queries": len(paired)}
        for metric in RETRIEVAL_METRICS:
            pairs = [(a.get(metric), b.get(metric)) for b, a in paired]
            if any(x is None or y is None for x, y in pairs):
                continue  # post metrics need post judgements
            out[config][metric] = _diff([float(a) for a, _ in pairs],
                                        [float(b) for _, b in pairs], resamples, seed)
    return out


def _by_side(doc: dict[str, Any], side: str) -> dict[str, dict[str, Any]]:
    return {r["query_id"]: r for r in doc["per_query"] if r["side"] == side}


def _zone(score: float, thresholds: dict[str, Any]) -> str:
    if score < thresholds["abstain"]:
        return "abstain"
    return "normal" if score >= thresholds["normal"] else "cautious"


def _rate_ci(n: int, stat_after: Callable[[np.ndarray], float],
             stat_before: Callable[[np.ndarray], float], resamples: int, seed: int
             ) -> dict[str, Any]:
    """A statistic of the same resampled questions under each model, the paired difference."""
    everyone = np.arange(n)
    rng = np.random.default_rng(seed)
    diffs = []
    for _ in range(resamples):
        idx = rng.integers(0, n, n)
        diffs.append(stat_after(idx) - stat_before(idx))
    low, high = np.quantile(diffs, [0.025, 0.975])
    return {"before": round(stat_before(everyone), 4), "after": round(stat_after(everyone), 4),
            "difference": round(stat_after(everyone) - stat_before(everyone), 4),
            "ci": [round(float(low), 4), round(float(high), 4)],
            "significant": bool(low > 0 or high < 0)}


def zones(before: dict[str, Any], after: dict[str, Any], *, resamples: int, seed: int,
          signal: str = "similarity") -> dict[str, Any]:
    """Leave-out and out-of-domain AUROC, and the calibrated rates (answerable with its
    evidence answered normally, leave-out held back, out of domain abstained), each model with
    its own calibrated thresholds, before and after."""
    out: dict[str, Any] = {}
    sides = {s: (_by_side(before, s), _by_side(after, s))
             for s in ("answerable", "leave_out", "out_of_domain")}
    pos_b, pos_a = sides["answerable"]
    shared = sorted(set(pos_b) & set(pos_a))
    for side in ("leave_out", "out_of_domain"):
        neg_b, neg_a = sides[side]
        neg = sorted(set(neg_b) & set(neg_a))
        if not shared or not neg:
            continue
        pos_pairs = [(pos_a[q][signal], pos_b[q][signal]) for q in shared]
        neg_pairs = [(neg_a[q][signal], neg_b[q][signal]) for q in neg]
        out[f"auroc_{side}"] = {
            "before": auroc_ci([b for _, b in pos_pairs], [b for _, b in neg_pairs],
                               resamples=resamples, seed=seed),
            "after": auroc_ci([a for a, _ in pos_pairs], [a for a, _ in neg_pairs],
                              resamples=resamples, seed=seed),
            "difference": auroc_difference_ci(pos_pairs, neg_pairs, resamples=resamples,
                                              seed=seed)}
    cal_b, cal_a = before["thresholds"]["calibrated"], after["thresholds"]["calibrated"]
    out["thresholds"] = {"before": {k: cal_b[k] for k in ("abstain", "normal")},
                         "after": {k: cal_a[k] for k in ("abstain", "normal")}}
    if shared:
        b = [pos_b[q] for q in shared]
        a = [pos_a[q] for q in shared]

        def answered(rows: list[dict[str, Any]], cal: dict[str, Any]) -> Callable[
                [np.ndarray], float]:
            hit = np.array([bool(r["evidence_hit"]) for r in rows])
            normal = np.array([_zone(r[signal], cal) == "normal" for r in rows])
            return lambda i: float(normal[i][hit[i]].mean()) if hit[i].any() else 0.0
        out["answerable_normal"] = _rate_ci(len(shared), answered(a, cal_a), answered(b, cal_b),
                                            resamples, seed)
    for side, zone_ok, name in (("leave_out", ("abstain", "cautious"), "leave_out_held_back"),
                                ("out_of_domain", ("abstain",), "out_of_domain_abstain")):
        neg_b, neg_a = sides[side]
        ids = sorted(set(neg_b) & set(neg_a))
        if not ids:
            continue

        def rate(rows: list[dict[str, Any]], cal: dict[str, Any],
                 ok: tuple[str, ...] = zone_ok) -> Callable[[np.ndarray], float]:
            held = np.array([_zone(r[signal], cal) in ok for r in rows])
            return lambda i: float(held[i].mean())
        out[name] = _rate_ci(len(ids), rate([neg_a[q] for q in ids], cal_a),
                             rate([neg_b[q] for q in ids], cal_b), resamples, seed)
    return out


def related(before: dict[str, Any], after: dict[str, Any], *, resamples: int, seed: int
            ) -> dict[str, Any]:
    """Related topics (and the search baseline of the same text), before and after."""
    out: dict[str, Any] = {}
    for system, series in before["related"]["series"].items():
        theirs = after["related"]["series"].get(system)
        if theirs is None:
            continue
        out[system] = {metric: _diff(theirs[metric], series[metric], resamples, seed)
                       for metric in RELATED_METRICS}
    return out
