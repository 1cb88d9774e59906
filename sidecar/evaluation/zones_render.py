"""The answerability evaluation as Markdown (FILE.md beside FILE.json)."""

from __future__ import annotations

from typing import Any

SIDE_NAMES = {"answerable": "answerable (judged queries)",
              "leave_out": "leave-out (in domain, relevant topics hidden)",
              "out_of_domain": "out of domain (another dump's queries)"}


def to_markdown(doc: dict[str, Any]) -> str:
    """Zones per side before and after calibration, AUROC per signal, the CV'd model."""
    meta, th = doc["meta"], doc["thresholds"]
    cal = th["calibrated"]
    lines = [
        f"## Answer or abstain: {meta['dump']}",
        "",
        f"{meta['queries']} judged queries; leave-out in {meta['folds']} folds; out of domain: "
        f"{', '.join(meta['ood']) or 'none'}. Scorer `{meta['scorer']}`. {meta['duration_s']} s.",
        f"Thresholds: settings abstain < {th['settings']['abstain']:g}, normal >= "
        f"{th['settings']['normal']:g}; calibrated on {cal['questions']} of the forum's own "
        f"questions (p{cal['abstain_pct']:g} / p{cal['normal_pct']:g}): abstain < "
        f"{cal['abstain']:.4f}, normal >= {cal['normal']:.4f}.",
        *_members_line(th.get("members")),
        "",
        "| thresholds | side | n | normal | cautious | abstain | normal when evidence hit |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, sides in doc["zones"].items():
        for side, c in sides.items():
            n = max(c["n"], 1)
            hit = (f"{c['normal_rate_when_evidence_hit']:.0%}" if side == "answerable"
                   else "–")
            lines.append(f"| {name} | {SIDE_NAMES[side]} | {c['n']} | {c['normal'] / n:.0%} | "
                         f"{c['cautious'] / n:.0%} | {c['abstain'] / n:.0%} | {hit} |")
    for side, per in doc["auroc"].items():
        lines += ["", f"AUROC, answerable against {SIDE_NAMES[side]} (95% bootstrap CI):", "",
                  "| signal | AUROC |", "|---|---|"]
        for signal, v in per.items():
            lines.append(f"| {signal} | {v['auroc']:.3f} [{v['ci_low']:.3f}, "
                         f"{v['ci_high']:.3f}] |")
    gain = doc.get("auroc_rerank_minus_cosine")
    if gain:
        lines += ["", "The reranker's score against the cosine on the same questions (AUROC "
                  "difference, paired 95% bootstrap CI):", "", "| against | rerank − cosine |",
                  "|---|---|"]
        for side, v in gain.items():
            lines.append(f"| {SIDE_NAMES[side]} | {v['difference']:+.3f} [{v['ci_low']:+.3f}, "
                         f"{v['ci_high']:+.3f}] |")
    trade = doc.get("tradeoff")
    if trade:
        lines += _tradeoff_tables("Other calibration percentiles (`sidecar calibrate "
                                  "--normal-pct` / `--abstain-pct`):", trade)
    combined = doc.get("tradeoff_combined")
    if combined:
        lines += _tradeoff_tables("The label-free combination (`combined`: similarity and log "
                                  "keyword score, each standardised on the calibration "
                                  "questions), measured, not served:", combined)
    lr = doc["logistic"]
    if lr.get("auroc_held_out") is not None:
        coefs = ", ".join(f"{k} {v:+.2f}" for k, v in lr["coefficients"].items())
        lines += ["", "Logistic regression over the signals but matched, answerable against "
                  f"leave-out, held out by fold: AUROC {lr['auroc_held_out']:.3f} (coefficients on "
                  f"standardised signals: {coefs})."]
    return "\n".join(lines) + "\n"


def _members_line(members: dict[str, Any] | None) -> list[str]:
    if not members:
        return []
    folds = ", ".join(f"{v:.4f}" for v in members["normal_by_fold"])
    return [f"Members' questions ({members['questions']} judged queries, each re-asked without "
            "the topic that answered it best; no label read): normal >= "
            f"p{members['normal_pct']:g} of the other folds' ({folds}), abstain as calibrated."]


def _tradeoff_tables(title: str, trade: dict[str, Any]) -> list[str]:
    """Per normal percentile: its threshold, the answerable questions kept normal and the
    leave-out ones held back; per abstain percentile, the out-of-domain and the answerable
    ones that abstain."""
    lines = ["", title, "", "| normal at | threshold | answerable (evidence hit) normal | "
             "leave-out cautious or abstain |", "|---|---|---|---|"]
    for pct, v in trade["normal"].items():
        lines.append(f"| p{pct} | {v['threshold']:.4f} | {_pct(v['answerable_normal'])} | "
                     f"{_pct(v['leave_out_held_back'])} |")
    lines += ["", "| abstain at | threshold | out of domain abstain | answerable abstain |",
              "|---|---|---|---|"]
    for pct, v in trade["abstain"].items():
        lines.append(f"| p{pct} | {v['threshold']:.4f} | {_pct(v['out_of_domain_abstain'])} | "
                     f"{_pct(v['answerable_abstain'])} |")
    return lines


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"
