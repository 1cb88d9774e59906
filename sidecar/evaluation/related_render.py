"""The Markdown report of `sidecar eval-related` (from its JSON document)."""

from __future__ import annotations

from typing import Any


def _ci(c: dict[str, Any]) -> str:
    star = " *" if c["significant"] else ""
    return f"{c['diff']:+.3f} [{c['ci_low']:+.3f}, {c['ci_high']:+.3f}]{star}"


def render(doc: dict[str, Any], command: str) -> str:
    """The report: related against search, then the composer's thresholds."""
    meta, rel, sim = doc["meta"], doc["related"], doc["similar"]
    lines = [f"# Related topics and similar topics: {meta['dump']}", "",
             f"`{command}`; {meta['model']}, strategy {meta['strategy']}, {meta['queries']} "
             f"judged queries, each added to a copy of the forum as a topic of its own "
             f"({meta['seeded']}); {meta['duration_s']:.0f} s.", "",
             "## /v1/topics/<id>/related against /v1/search (subject as query, body as "
             "details)", "",
             "| system | Hit@1 | Hit@5 | MRR@10 | empty lists | p50 / p95 ms |",
             "|---|---|---|---|---|---|"]
    for row in rel["systems"]:
        lat = rel["latency"].get(row["system"], {})
        lines.append(f"| {row['system']} | {row['hit@1']:.3f} | {row['hit@5']:.3f} | "
                     f"{row['mrr@10']:.3f} | {row['empty']} | "
                     f"{lat.get('p50_ms', 0):.1f} / {lat.get('p95_ms', 0):.1f} |")
    lines += ["", "| system | baseline | ΔMRR@10 [95% CI] | ΔHit@5 [95% CI] | wins / losses |",
              "|---|---|---|---|---|"]
    for c in rel["comparisons"]:
        lines.append(f"| {c['system']} | {c['baseline']} | {_ci(c['mrr@10'])} | "
                     f"{_ci(c['hit@5'])} | {c['mrr@10']['wins']} / {c['mrr@10']['losses']} |")
    cal = sim["calibration"]
    lines += ["", "Latency here is the evaluation's, cold (no cache), on this small forum; "
              "`sidecar bench --part related` measures it at forum scale.", "",
              "## /v1/similar: silence below a threshold", "",
              f"Calibrated on {cal['questions']} of the forum's own opening posts asked without "
              f"their topic: abstain below {cal['abstain']:.4f} (p{cal['abstain_pct']:g}), "
              f"normal from {cal['normal']:.4f} (p{cal['normal_pct']:g}). Hit@5 and MRR@10 "
              "count a silent answer as a miss. Silence elsewhere: share of another dump's "
              f"questions ({', '.join(f'{k}: {v}' for k, v in sim['elsewhere_questions'].items())}"
              f") answered with nothing; target >= {sim['silence_target']:.0%}.", "",
              "| threshold | value | Hit@5 | MRR@10 | silent here | Hit@5 when shown | "
              "silent elsewhere | ΔMRR@10 vs search |", "|---|---|---|---|---|---|---|---|"]
    vs = {c["system"]: c for c in sim["vs_search"]}
    for row in sim["thresholds"]:
        shown = row["hit@5_when_shown"]
        elsewhere = ", ".join(f"{k} {v:.1%}" for k, v in row["silence_elsewhere"].items())
        delta = _ci(vs["similar@" + row["threshold"]]["mrr@10"])
        when = "" if shown is None else f"{shown:.3f}"
        lines.append(f"| {row['threshold']} | {row['value']:.4f} | {row['hit@5']:.3f} | "
                     f"{row['mrr@10']:.3f} | {row['silent']:.1%} | {when} | {elsewhere} | "
                     f"{delta} |")
    chosen = sim["chosen"]
    verdict = (f"Chosen among the calibrated thresholds (SIDECAR_SIMILAR_THRESHOLD: abstain "
               f"or normal): **{chosen}**" if chosen
               else "No calibrated threshold meets the silence target.")
    fallback = sim.get("chosen_uncalibrated")
    verdict += (f"; among the settings' fixed ones (a forum not calibrated): **{fallback}**."
                if fallback else "; none of the settings' fixed ones meets it.")
    lines += ["", verdict, "", "### At each quantile of the calibration", "",
              "| quantile | value | Hit@5 | silent here | silent elsewhere |",
              "|---|---|---|---|---|"]
    for row in sim["curve"]:
        elsewhere = ", ".join(f"{v:.1%}" for v in row["silence_elsewhere"].values())
        lines.append(f"| {row['threshold']} | {row['value']:.4f} | {row['hit@5']:.3f} | "
                     f"{row['silent']:.1%} | {elsewhere} |")
    return "\n".join(lines) + "\n"
