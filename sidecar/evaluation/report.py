"""The evaluation's outputs: FILE.json (schema: docs/evaluation.md), FILE.md and FILE.png."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from sidecar.evaluation.runner import OPEN_DEPTH, POST_K, EvalRun

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1

PROTOCOLS: dict[str, str] = {
    "open_corpus": (
        "Every topic of the dump is a candidate; the configuration's pipeline returns its "
        f"ranked topics (top {OPEN_DEPTH}). A topic is relevant when qrels_topic grades it >= 1; "
        "unjudged topics count as not relevant. Hit@1, Hit@5, MRR@10 and nDCG@10 (linear gains "
        "= grade, ideal from all judged grades of the query) are averaged over the queries with "
        "at least one relevant topic."
    ),
    "post_level": (
        f"post_hit@1 / post_hit@{POST_K}: 1 when one of the posts linked by the first 1 / "
        f"{POST_K} topics (the post each result's URL points to, chosen by the configuration's "
        "post chooser) has a qrels_post grade >= 1; post_mrr@10: 1 / the rank of the first "
        "topic whose linked post does; post_good@k: the same with grade 2 (Good), over the "
        "queries that have a Good post. Only replies are judged in qatarliving, so a link to a "
        "topic's opening post never counts."
    ),
    "protocol_b": (
        "SemEval-2016 Task 3 subtask B: rank only the query's judged topics. The same pipeline "
        "returns a deep list (every public topic, at most 2,000; 5 posts per topic and leg); "
        "the judged topics keep that order, the configuration's stages reorder them, judged "
        "topics the list did not reach are appended in id order. Average precision as the "
        "official scorer (relevant = grade >= 1), MAP over queries with at least one relevant "
        "topic."
    ),
    "evidence": (
        "evidence_items: how many of a configuration's first topics POST /v1/retrieve keeps as "
        "evidence (SIDECAR_RETRIEVE_LIMIT, or fewer where the knee cut-off is on: the cut reads "
        "the scores of the wide candidate list, cross-encoder scores after a rerank stage, "
        "else the bi-encoder cosine of each topic's best post); evidence_hit: 1 when a "
        "relevant topic is among the kept items. redundancy@5: mean pairwise cosine of the "
        "stored vectors of the posts the first five topics link to (lower = more diverse). "
        "Averaged over the scored queries."
    ),
    "comparison": (
        "Per query, against the baseline (and against the parent configuration that differs "
        "by one factor): wins/losses/ties on reciprocal rank at 10; mean difference of each "
        "metric with a paired percentile bootstrap 95% CI over queries (10,000 resamples, "
        "fixed seed). 'significant' means the CI excludes 0."
    ),
}

CHAIN_METRICS = ("evidence_items", "evidence_hit", "redundancy@5")

LABELS: dict[str, str] = {"hit@1": "Hit@1", "hit@5": "Hit@5", "mrr@10": "MRR@10",
                          "ndcg@10": "nDCG@10", "post_hit@1": "Post Hit@1",
                          "post_hit@5": "Post Hit@5", "post_mrr@10": "Post MRR@10",
                          "map_b": "MAP (B)"}


def to_json(run: EvalRun, meta: dict[str, Any], skipped: dict[str, str]) -> dict[str, Any]:
    """The full result document."""
    return {
        "schema_version": SCHEMA_VERSION,
        "meta": meta,
        "protocols": PROTOCOLS,
        "baseline": run.baseline,
        "configs": [r.config.as_dict() for r in run.results],
        "skipped": skipped,
        "metrics": {r.config.name: {k: (None if v is None else round(v, 6))
                                    for k, v in r.metrics.items()} for r in run.results},
        "comparisons": [c.as_dict() for c in run.comparisons],
        "per_query": {r.config.name: [q.as_dict() for q in r.queries] for r in run.results},
    }


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _diff(entry: dict[str, Any] | None) -> str:
    if entry is None:
        return "–"
    mark = "" if not entry["significant"] else " *"
    return (f"{entry['mean_diff']:+.3f} [{entry['ci_low']:+.3f}, "
            f"{entry['ci_high']:+.3f}]{mark}")


def to_markdown(doc: dict[str, Any]) -> str:
    """The tables a reader needs: every configuration, its metrics and its CI vs the baseline."""
    meta = doc["meta"]
    base = doc["baseline"]
    vs_base = {c["config"]: c for c in doc["comparisons"] if c["kind"] == "baseline"}
    lines = [
        f"## Retrieval evaluation: {meta['dump_name']}",
        "",
        f"{meta['queries_scored']} queries with a relevant topic (of {meta['queries_total']}); "
        f"{meta['forum']['topics']} topics, {meta['forum']['posts']} posts. Model "
        f"`{meta['model']['name']}`, strategy {', '.join(map(str, meta['strategies']))}, "
        f"reranker `{meta['reranker'] or 'none'}`. Baseline: `{base}`.",
        f"Machine: {meta['machine']['cpu']}, {meta['machine']['logical_cpus']} logical CPUs. "
        f"Date: {meta['date']}. Duration: {meta['duration_s']:.0f} s "
        f"(state {'reused' if meta['state']['reused'] else 'built'} in "
        f"{meta['state']['timings'].get('total_s', 0):.0f} s). Command: `{meta['command']}`",
        "",
        "| Config | Factor changed | " + " | ".join(LABELS.values())
        + " | ΔMRR@10 vs baseline [95% CI] | ΔnDCG@10 [95% CI] | W/L/T (RR) | ms/query |",
        "|---|---|" + "---|" * (len(LABELS) + 4),
    ]
    configs = {c["name"]: c for c in doc["configs"]}
    for name, values in doc["metrics"].items():
        comp = vs_base.get(name)
        mrr = comp["metrics"]["mrr@10"] if comp else None
        ndcg = comp["metrics"]["ndcg@10"] if comp else None
        wlt = f"{comp['wins']}/{comp['losses']}/{comp['ties']}" if comp else "baseline"
        label = f"**{name}**" if name == base else name
        lines.append(
            f"| {label} | {configs[name]['factor']} | "
            + " | ".join(_num(values.get(k)) for k in LABELS)
            + f" | {_diff(mrr)} | {_diff(ndcg)} | {wlt} | {values.get('ms_mean', 0):.0f} |"
        )
    parents = [c for c in doc["comparisons"] if c["kind"] == "parent"]
    if parents:
        lines += ["", "One factor at a time (each configuration against its parent):", "",
                  "| Config | vs | Factor | ΔMRR@10 [95% CI] | ΔnDCG@10 [95% CI] | ΔMAP (B) "
                  "[95% CI] | W/L/T |", "|---|---|---|---|---|---|---|"]
        for c in parents:
            lines.append(
                f"| {c['config']} | {c['reference']} | {configs[c['config']]['factor']} | "
                f"{_diff(c['metrics']['mrr@10'])} | {_diff(c['metrics']['ndcg@10'])} | "
                f"{_diff(c['metrics']['map_b'])} | {c['wins']}/{c['losses']}/{c['ties']} |")
    served = [c for c in doc["comparisons"] if c["config"] == "served"
              and c["kind"] in ("baseline", "served")]
    if served:
        config = doc["meta"].get("service_config", {})
        # Questions with details are served the profile's slot for that shape, if it has one.
        shape = "served_with_details" if "+" in doc["meta"].get("query_fields", "") \
            and config.get("served_with_details") else "served"
        what = f"{config.get('source', '?')}" + (", queries with details" if shape != "served"
                                                 else "")
        posts = doc["metrics"]["served"].get("post_hit@5") is not None
        post_cols = " | ΔPost Hit@1 [95% CI] | ΔPost Hit@5 [95% CI]" if posts else ""
        lines += ["", f"Served configuration ({what}): `{config.get(shape)}`", "",
                  "| Served vs | ΔMRR@10 [95% CI] | ΔHit@5 [95% CI] | ΔnDCG@10 [95% CI]"
                  f"{post_cols} | W/L/T |", "|---|---|---|---|" + "---|---|" * posts + "---|"]
        for c in served:
            extra = (f" | {_diff(c['metrics'].get('post_hit@1'))} | "
                     f"{_diff(c['metrics'].get('post_hit@5'))}") if posts else ""
            lines.append(f"| {c['reference']} | {_diff(c['metrics']['mrr@10'])} | "
                         f"{_diff(c['metrics']['hit@5'])} | {_diff(c['metrics']['ndcg@10'])}"
                         f"{extra} | {c['wins']}/{c['losses']}/{c['ties']} |")
    chained = [c for c in doc["configs"]
               if any((c.get("chain") or {}).get(k) for k in ("mmr", "boosts", "knee"))]
    if chained:
        lines += ["", "Rerank chain stages against their parents: evidence kept for "
                  "`/v1/retrieve` and redundancy of the first five results (lower = more "
                  "diverse):", "",
                  "| Config | vs | Items kept | Relevant kept | Redundancy@5 | Parent items "
                  "| Parent relevant kept | Parent redundancy@5 |",
                  "|---|---|---|---|---|---|---|---|"]
        for c in chained:
            own, parent = doc["metrics"][c["name"]], doc["metrics"].get(c["parent"] or "", {})
            lines.append(
                f"| {c['name']} | {c['parent']} | "
                + " | ".join(_num(own.get(k)) for k in CHAIN_METRICS) + " | "
                + " | ".join(_num(parent.get(k)) for k in CHAIN_METRICS) + " |")
    lines += ["", "`*`: the 95% CI excludes 0. W/L/T: queries where the configuration's "
              "reciprocal rank (at 10) is higher / lower / equal."]
    if doc["skipped"]:
        lines += [""] + [f"- skipped `{k}`: {v}" for k, v in doc["skipped"].items()]
    unranked = {k: v.get("b_unranked_share") or 0.0 for k, v in doc["metrics"].items()}
    worst = max(unranked.values(), default=0.0)
    if worst > 0:
        lines.append(f"- protocol B: at most {worst:.1%} of judged topics were beyond the deep "
                     "list and appended in id order")
    return "\n".join(lines) + "\n"


def write_png(doc: dict[str, Any], path: Path) -> Path | None:
    """Bar chart of the metrics per configuration and a forest plot of ΔMRR@10 vs baseline.

    Returns None (and says why in the log) when matplotlib is not installed.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed: no chart (pip install '.[dev]')")
        return None
    names = list(doc["metrics"])
    shown = [k for k in ("hit@5", "mrr@10", "ndcg@10", "post_hit@5", "map_b")
             if any(doc["metrics"][n].get(k) is not None for n in names)]
    fig, (left, right) = plt.subplots(1, 2, figsize=(14, 0.55 * len(names) + 3),
                                      gridspec_kw={"width_ratios": [3, 2]})
    height = 0.8 / max(len(shown), 1)
    for i, metric in enumerate(shown):
        values = [doc["metrics"][n].get(metric) or 0.0 for n in names]
        ys = [j + i * height for j in range(len(names))]
        left.barh(ys, values, height=height, label=LABELS[metric])
    left.set_yticks([j + 0.4 - height / 2 for j in range(len(names))], names)
    left.invert_yaxis()
    left.set_xlim(0, 1)
    left.set_xlabel("score")
    left.legend(loc="upper center", bbox_to_anchor=(0.5, -0.08), ncol=len(shown), fontsize=8)
    left.set_title(f"{doc['meta']['dump_name']}: {doc['meta']['queries_scored']} queries")
    comps = {c["config"]: c["metrics"]["mrr@10"] for c in doc["comparisons"]
             if c["kind"] == "baseline"}
    others = [n for n in names if n in comps]
    diffs = [comps[n]["mean_diff"] for n in others]
    errs = [[comps[n]["mean_diff"] - comps[n]["ci_low"] for n in others],
            [comps[n]["ci_high"] - comps[n]["mean_diff"] for n in others]]
    right.errorbar(diffs, range(len(others)), xerr=errs, fmt="o", capsize=4)
    right.axvline(0, color="grey", linewidth=1)
    right.set_yticks(range(len(others)), others)
    right.invert_yaxis()
    right.set_xlabel(f"ΔMRR@10 vs {doc['baseline']} (95% paired bootstrap CI)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def write_outputs(doc: dict[str, Any], out: Path, *, png: bool = True) -> dict[str, Path]:
    """``out`` (JSON), and next to it the Markdown table and the PNG chart."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n")
    written = {"json": out}
    md = out.with_suffix(".md")
    md.write_text(to_markdown(doc))
    written["markdown"] = md
    if png:
        chart = write_png(doc, out.with_suffix(".png"))
        if chart is not None:
            written["png"] = chart
    return written
