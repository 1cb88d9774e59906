"""The tuner's Markdown summary (held-out figures, what each reference scores, what is served)."""

from __future__ import annotations

from typing import Any

_NAMES = {"mrr@10": "MRR@10", "hit@1": "Hit@1", "hit@5": "Hit@5", "ndcg@10": "nDCG@10"}


def _ci(c: dict[str, Any]) -> str:
    star = " *" if c["significant"] else ""
    return f"{c['mean_diff']:+.3f} [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}]{star}"


def to_markdown(doc: dict[str, Any]) -> str:
    """Tables of a `sidecar tune` report."""
    cv = doc["cross_validation"]
    j = doc["judgements"]
    sources = ", ".join(f"{k} {v}" for k, v in j["by_source"].items())
    lines = [
        f"# sidecar tune: {j['queries']} judged queries ({sources}), {doc['candidates']} "
        f"configurations, {cv['folds']}-fold cross-validation",
        "",
        "Held-out: each query is scored by the configuration chosen on the other folds. "
        "Δ: paired bootstrap 95% CI of tuned (held-out) minus the reference; * = excludes 0."
        + (" Search-log queries are weighted by inverse propensity." if j["weighted"] else ""),
        "",
        "| | " + " | ".join(_NAMES.values()) + " | ΔMRR@10 (tuned − this) | ΔHit@5 |",
        "|---|" + "---|" * (len(_NAMES) + 2),
        "| **tuned (held-out)** | " + " | ".join(f"{cv['held_out'][k]:.3f}" for k in _NAMES)
        + " | – | – |",
    ]
    for name, ref in doc["references"].items():
        against = cv["against"][name]
        lines.append(f"| {name} ({ref['config']}) | "
                     + " | ".join(f"{ref['scores'][k]:.3f}" for k in _NAMES)
                     + f" | {_ci(against['mrr@10'])} | {_ci(against['hit@5'])} |")
    lines += ["", f"Chosen per fold: {', '.join(cv['chosen_per_fold'])}.",
              f"Chosen on all queries: `{doc['chosen_on_all']['config']}` "
              f"{doc['chosen_on_all']['describe']}."]
    if doc["fallback"]:
        lines.append(f"Fallback: {doc['fallback']}.")
    lines.append(f"**Served**: `{doc['served']['config']}` {doc['served']['describe']}.")
    return "\n".join(lines) + "\n"
