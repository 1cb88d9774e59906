"""Scores of `sidecar eval-related` (pure): ranked lists against judgements, paired
comparisons, and the composer's silence at each candidate threshold."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sidecar.evaluation import metrics as m

DEPTH = 10  # topics scored per list (Hit@k, MRR@10)
SILENCE_TARGET = 0.90  # the issue's: /similar silent on >= 90% of another forum's questions
Candidates = list[tuple[int, float | None]]  # (topic id, similarity), in the served order


def list_scores(ranking: Sequence[int], qrels: m.Qrels) -> dict[str, float]:
    """Hit@1, Hit@5 and reciprocal rank (cut at 10) of one list (empty: all 0)."""
    return {"hit@1": m.hit_at(ranking, qrels, 1), "hit@5": m.hit_at(ranking, qrels, 5),
            "mrr@10": m.reciprocal_rank(ranking, qrels, DEPTH)}


def system_row(name: str, lists: Sequence[Sequence[int]], qrels: Sequence[m.Qrels]
               ) -> dict[str, Any]:
    """A system's means over the queries, and its per-query series (for comparisons)."""
    per = [list_scores(r, q) for r, q in zip(lists, qrels, strict=True)]
    series = {k: [p[k] for p in per] for k in ("hit@1", "hit@5", "mrr@10")}
    return {"system": name, "n": len(per),
            **{k: round(m.mean(v), 4) for k, v in series.items()},
            "empty": sum(1 for r in lists if not r), "series": series}


def comparison(system: Mapping[str, Any], baseline: Mapping[str, Any], resamples: int,
               seed: int) -> dict[str, Any]:
    """Paired bootstrap of system - baseline on MRR@10 and Hit@5."""
    out: dict[str, Any] = {"system": system["system"], "baseline": baseline["system"]}
    for metric in ("mrr@10", "hit@5"):
        c = m.compare(system["series"][metric], baseline["series"][metric],
                      resamples=resamples, seed=seed)
        out[metric] = {"diff": round(c.mean_diff, 4), "ci_low": round(c.ci_low, 4),
                       "ci_high": round(c.ci_high, 4), "wins": c.wins, "losses": c.losses,
                       "ties": c.ties, "significant": c.significant}
    return out


def passed(candidates: Candidates, threshold: float) -> list[int]:
    """What /v1/similar shows at ``threshold``: the topics that reach it, in served order."""
    return [t for t, sim in candidates if sim is not None and sim >= threshold]


def best(candidates: Candidates) -> float | None:
    """The best similarity among the candidates (None: nothing matched)."""
    sims = [s for _, s in candidates if s is not None]
    return max(sims) if sims else None


def threshold_row(name: str, value: float, judged: Sequence[Candidates],
                  qrels: Sequence[m.Qrels], others: Mapping[str, Sequence[Candidates]]
                  ) -> dict[str, Any]:
    """/v1/similar at one threshold: on the judged questions (Hit@5, MRR@10 with silence
    counted as a miss, how often silent, how often right when it speaks) and its silence on
    each other forum's questions."""
    lists = [passed(c, value) for c in judged]
    per = [list_scores(r, q) for r, q in zip(lists, qrels, strict=True)]
    spoke = [p for p, r in zip(per, lists, strict=True) if r]
    row: dict[str, Any] = {
        "threshold": name, "value": round(value, 4),
        "hit@5": round(m.mean([p["hit@5"] for p in per]), 4),
        "mrr@10": round(m.mean([p["mrr@10"] for p in per]), 4),
        "silent": round(sum(1 for r in lists if not r) / max(len(lists), 1), 4),
        "hit@5_when_shown": round(m.mean([p["hit@5"] for p in spoke]), 4) if spoke else None,
        "series": {"hit@5": [p["hit@5"] for p in per], "mrr@10": [p["mrr@10"] for p in per]},
    }
    row["silence_elsewhere"] = {
        other: round(sum(1 for c in cands if not passed(c, value)) / max(len(cands), 1), 4)
        for other, cands in others.items()}
    row["meets_silence_target"] = bool(others) and all(
        v >= SILENCE_TARGET for v in row["silence_elsewhere"].values())
    return row


def choose_threshold(rows: Sequence[Mapping[str, Any]], offered: Sequence[str]) -> str | None:
    """Among the thresholds the setting offers, the best in-domain Hit@5 (then MRR@10) of
    those that meet the silence target; None when none does."""
    ok = [r for r in rows if r["threshold"] in offered and r["meets_silence_target"]]
    if not ok:
        return None
    return str(max(ok, key=lambda r: (r["hit@5"], r["mrr@10"]))["threshold"])


def quantile_curve(judged: Sequence[Candidates], qrels: Sequence[m.Qrels],
                   others: Mapping[str, Sequence[Candidates]], quantiles: Sequence[float],
                   step: int) -> list[dict[str, Any]]:
    """The same rows at each quantile of the calibration (``step`` % apart)."""
    rows = []
    for i, value in enumerate(quantiles):
        row = threshold_row(f"p{i * step}", value, judged, qrels, others)
        row.pop("series")
        rows.append(row)
    return rows


def latency(ms: Sequence[float]) -> dict[str, float]:
    """p50 and p95 in milliseconds."""
    if not ms:
        return {"p50_ms": 0.0, "p95_ms": 0.0}
    p50, p95 = np.percentile(np.asarray(ms, dtype=np.float64), [50, 95])
    return {"p50_ms": round(float(p50), 2), "p95_ms": round(float(p95), 2)}
