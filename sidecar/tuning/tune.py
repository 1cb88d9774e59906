"""`sidecar tune` end to end: judgements -> scores -> cross-validation -> a search profile.

The report gives the held-out figures only (each query scored by a configuration chosen without
it), with paired bootstrap CIs against semantic alone, keyword alone and the untuned default. The
profile serves the configuration chosen on all the judgements, unless the held-out figures say
fusion does not pay on this forum: then it serves the best single leg.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sidecar.core.searchconfig import SearchConfig
from sidecar.core.types import Mode
from sidecar.errors import InvalidInput
from sidecar.evaluation import metrics as m
from sidecar.search.profile_schema import SearchProfile, ServedModel
from sidecar.tuning.crossval import CrossValidation, cross_validate, kfold
from sidecar.tuning.judgements import Judged, counts
from sidecar.tuning.scoring import ScoreTable, describe_scores
from sidecar.tuning.space import Candidate

# Below this many judged queries the tuner refuses (see `minimum_reason`).
MIN_QUERIES = 50
# The spread of per-query reciprocal-rank differences between two configurations, measured on
# the Qatar Living evaluation (sd 0.25-0.35): used to say what a given number of queries can tell.
RR_DIFF_SD = 0.3
REFERENCES = ("semantic", "keyword", "default")


def detectable_difference(n: int, sd: float = RR_DIFF_SD) -> float:
    """Half-width of a 95% CI on a mean MRR@10 difference over ``n`` queries."""
    return 1.96 * sd / math.sqrt(max(n, 1))


def minimum_reason(n: int, needed: int) -> str:
    """Why ``n`` judged queries are not enough."""
    return (f"{n} judged queries, {needed} needed: with n queries a 95% interval on an MRR@10 "
            f"difference is about ±1.96·{RR_DIFF_SD}/√n (±{detectable_difference(n):.3f} here, "
            f"±{detectable_difference(needed):.3f} at {needed}), wider than the gaps between "
            "fusion settings (0.01-0.05), and 5-fold cross-validation would hold out fewer than "
            f"{max(needed // 5, 1)} queries per fold; add judgements (moderator labels on the "
            "review page, members' searches in search_logs, or qrels with --dump)")


@dataclass
class TuneResult:
    """What the tuner found and what it serves."""

    table: ScoreTable
    cv: CrossValidation
    served: Candidate
    fallback: str | None
    comparisons: dict[str, dict[str, m.PairedComparison]]
    references: dict[str, Candidate]

    def held_out(self, metric: str) -> np.ndarray:
        """Held-out per-query scores of the tuning procedure."""
        return self.cv.held_out_scores(self.table.scores[metric])


def check_enough(queries: Sequence[Judged], needed: int) -> None:
    """Refuse to tune on too few judgements (the message says how many and why)."""
    if len(queries) < needed:
        by_source = ", ".join(f"{k}: {v}" for k, v in counts(queries).items())
        raise InvalidInput(f"not enough judgements to tune ({by_source}). "
                           + minimum_reason(len(queries), needed))


def tune(table: ScoreTable, references: dict[str, Candidate], *, folds: int = 5, seed: int = 0,
         resamples: int = 10_000) -> TuneResult:
    """Cross-validate the choice; compare with the references; fall back to a leg if needed."""
    w = table.weights
    primary, secondary = table.scores["mrr@10"], table.scores["hit@5"]
    anchor = table.index(references["default"].name) if "default" in references else None
    cv = cross_validate(primary, secondary, w, kfold(len(table.queries), folds, seed), anchor,
                        seed=seed)
    comparisons: dict[str, dict[str, m.PairedComparison]] = {}
    for ref_name, ref in references.items():
        row = table.index(ref.name)
        comparisons[ref_name] = {
            # Lists: compare() takes any sequence of floats (one query's score each).
            metric: m.compare(cv.held_out_scores(values).tolist(), values[row].tolist(),
                              resamples=resamples, seed=seed, weights=w.tolist())
            for metric, values in table.scores.items()}
    served = table.candidates[cv.final]
    fallback = None
    legs = {name: references[name] for name in ("semantic", "keyword") if name in references}
    if legs and len(served.config.legs()) > 1:
        best_leg = max(legs, key=lambda n: table.means(table.index(legs[n].name))["mrr@10"])
        vs = comparisons[best_leg]["mrr@10"]
        if vs.mean_diff <= 0 or vs.ci_high < 0:
            fallback = (f"fusion does not pay on held-out queries (ΔMRR@10 vs {best_leg} alone "
                        f"{vs.mean_diff:+.3f} [{vs.ci_low:+.3f}, {vs.ci_high:+.3f}]): serving "
                        f"{best_leg} alone")
            served = legs[best_leg]
    return TuneResult(table=table, cv=cv, served=served, fallback=fallback,
                      comparisons=comparisons, references=references)


def _cmp(c: m.PairedComparison) -> dict[str, Any]:
    return {"mean_diff": round(c.mean_diff, 4), "ci_low": round(c.ci_low, 4),
            "ci_high": round(c.ci_high, 4), "significant": c.significant,
            "wins": c.wins, "losses": c.losses, "ties": c.ties}


def report(result: TuneResult, *, meta: dict[str, Any]) -> dict[str, Any]:
    """The JSON report (held-out figures only, plus what is served)."""
    table, cv = result.table, result.cv
    w = table.weights
    held = {metric: round(float(result.held_out(metric) @ w / w.sum()), 4)
            for metric in table.scores}
    refs = {name: {"config": c.name, "describe": c.config.describe(),
                   "scores": describe_scores(table.means(table.index(c.name)))}
            for name, c in result.references.items()}
    return {
        "meta": meta,
        "judgements": {"queries": len(table.queries), "by_source": counts(table.queries),
                       "weighted": bool((w != 1).any())},
        "candidates": len(table.candidates),
        "cross_validation": {
            "folds": len(cv.folds), "fold_sizes": [len(f) for f in cv.folds],
            "chosen_per_fold": [table.candidates[i].name for i in cv.chosen],
            "held_out": held,
            "against": {name: {metric: _cmp(c) for metric, c in per.items()}
                        for name, per in result.comparisons.items()},
        },
        "references": refs,
        "chosen_on_all": {"config": table.candidates[cv.final].name,
                          "describe": table.candidates[cv.final].config.describe()},
        "served": {"config": result.served.name, "describe": result.served.config.describe()},
        "fallback": result.fallback,
    }


def profile_of(result: TuneResult, doc: dict[str, Any], *, model: str, strategy: int
               ) -> SearchProfile:
    """The search profile that serves the tuner's choice, with the held-out summary."""
    cv_doc = doc["cross_validation"]
    return SearchProfile(
        model=model, strategy=strategy, served=ServedModel.of(result.served.config),
        tuning={"served": doc["served"], "fallback": doc["fallback"],
                "judgements": doc["judgements"], "held_out": cv_doc["held_out"],
                "against": {name: per["mrr@10"] for name, per in cv_doc["against"].items()},
                "command": doc["meta"].get("command"), "seed": doc["meta"].get("seed")})


def reference_candidates(default: SearchConfig, candidates: list[Candidate]
                         ) -> dict[str, Candidate]:
    """Semantic alone, keyword alone and the untuned default, found among the candidates (each
    is appended when the space lacks it)."""
    wanted = {"semantic": SearchConfig(Mode.SEMANTIC), "keyword": SearchConfig(Mode.KEYWORD),
              "default": default}
    out = {}
    for name, config in wanted.items():
        found = next((c for c in candidates if c.config == config), None)
        if found is None:
            found = Candidate(name, config)
            candidates.append(found)
        out[name] = found
    return out
