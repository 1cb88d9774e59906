"""The promotion guard: a new reranker is served only when it beats what is served, held out.

Both scorers read the pairs of topics the new model never trained on (a hash of the topic id
puts them aside, :func:`sidecar.training.mining.held_out`). Held-out pairs are mined without the
positive-aware filter, so the bi-encoder is not flattered by negatives chosen below its own
scores. Per question, the reciprocal rank of its first answer among its pairs; the paired
bootstrap CI of the mean difference decides: promoted when its lower end is above 0. Where the
forum's people judged questions of held-out topics (moderators' labels, search-log clicks:
``judged`` questions), at least :data:`MIN_JUDGED` of them, the new model must not rank their
answers worse on average either: those are the questions members really asked.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sidecar.evaluation.metrics import paired_bootstrap_ci
from sidecar.evaluation.zone_stats import auroc_ci
from sidecar.training.mining import Pair

Scorer = Callable[[Sequence[Pair]], Sequence[float]]
MIN_QUESTIONS = 30  # held-out questions below which no verdict is given
MIN_JUDGED = 10  # held-out judged questions from which they have a say


@dataclass(frozen=True)
class Verdict:
    """What the guard measured and decided."""

    promote: bool
    reason: str
    figures: dict[str, Any]


def reciprocal_ranks(pairs: Sequence[Pair], scores: Sequence[float], *,
                     judged: bool | None = None) -> list[float]:
    """Per question (in first-seen order), 1 / rank of its best-ranked answer among its pairs
    (ties count against it); ``judged`` keeps only the judged questions (True) or the mined
    ones (False)."""
    groups: dict[tuple[int, str], list[tuple[float, float]]] = defaultdict(list)
    asked = {(p.topic_id, p.question) for p in pairs if p.kind == "positive"
             and (judged is None or p.judged == judged)}
    for pair, score in zip(pairs, scores, strict=True):
        if (pair.topic_id, pair.question) in asked:
            groups[(pair.topic_id, pair.question)].append((score, pair.label))
    out = []
    for rows in groups.values():
        best = max((s for s, label in rows if label == 1.0), default=None)
        if best is None or all(label == 1.0 for _, label in rows):
            continue
        out.append(1.0 / (1 + sum(1 for s, label in rows if label == 0.0 and s >= best)))
    return out


def judge(pairs: Sequence[Pair], new: Scorer, served: Scorer, *, served_name: str,
          new_name: str, resamples: int = 2000, seed: int = 0) -> Verdict:
    """Score the held-out ``pairs`` with both and decide."""
    new_scores, old_scores = list(new(pairs)), list(served(pairs))
    new_rr = reciprocal_ranks(pairs, new_scores)
    old_rr = reciprocal_ranks(pairs, old_scores)
    labels = np.array([p.label for p in pairs])

    def auroc(scores: Sequence[float]) -> dict[str, float]:
        s = np.asarray(scores, dtype=np.float64)
        return auroc_ci(s[labels == 1.0], s[labels == 0.0], resamples=resamples, seed=seed)

    figures: dict[str, Any] = {"questions": len(new_rr), "pairs": len(pairs),
                               "scorers": {"new": new_name, "served": served_name}}
    if len(new_rr) < MIN_QUESTIONS:
        return Verdict(False, f"{len(new_rr)} held-out questions, fewer than the "
                              f"{MIN_QUESTIONS} a verdict needs: not promoted", figures)
    diff, low, high = paired_bootstrap_ci(new_rr, old_rr, resamples=resamples, seed=seed)
    figures.update({
        "mrr": {"new": round(float(np.mean(new_rr)), 4), "served": round(float(np.mean(old_rr)), 4),
                "difference": round(diff, 4), "ci": [round(low, 4), round(high, 4)]},
        "pair_auroc": {"new": auroc(new_scores), "served": auroc(old_scores)}})
    judged_new = reciprocal_ranks(pairs, new_scores, judged=True)
    judged_old = reciprocal_ranks(pairs, old_scores, judged=True)
    if len(judged_new) >= MIN_JUDGED:
        j_diff, j_low, j_high = paired_bootstrap_ci(judged_new, judged_old, resamples=resamples,
                                                    seed=seed)
        figures["judged_mrr"] = {"questions": len(judged_new),
                                 "new": round(float(np.mean(judged_new)), 4),
                                 "served": round(float(np.mean(judged_old)), 4),
                                 "difference": round(j_diff, 4),
                                 "ci": [round(j_low, 4), round(j_high, 4)]}
        if low > 0 and j_diff < 0:
            return Verdict(False, f"better on mined questions but worse on the {len(judged_new)} "
                                  f"questions the forum's people judged (MRR {j_diff:+.3f}): "
                                  "not promoted", figures)
    if low > 0:
        return Verdict(True, f"held-out MRR {np.mean(new_rr):.3f} against {np.mean(old_rr):.3f} "
                             f"for {served_name} (+{diff:.3f}, 95% CI [{low:+.3f}, {high:+.3f}])",
                       figures)
    return Verdict(False, f"held-out MRR {np.mean(new_rr):.3f} against {np.mean(old_rr):.3f} for "
                          f"{served_name} ({diff:+.3f}, 95% CI [{low:+.3f}, {high:+.3f}]): not "
                          "better beyond chance, not promoted", figures)
