"""`sidecar eval --train-embedder`: the embedder tuned on a dump's forum, before and after.

The forum of an evaluation dump is imported as for any evaluation; the embedder is tuned on it
with the product's own path (:func:`sidecar.training.embed_run.train_forum_embedder`), never
reading a topic judged relevant to one of the dump's questions (the questions themselves are not
in the forum). The tuned model is kept under the evaluation's models folder, named after the
dump's forum and the options, and reused while they are unchanged. Then the same evaluations
run with the base model and with the tuned one, each on its own vectors, from a fresh state (no
search profile: what a new forum gets), and every difference is paired query by query
(:mod:`sidecar.training.embed_compare`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from models.errors import ModelLoadError
from models.manifest import read_manifest
from sidecar.config.settings import Settings
from sidecar.evaluation import configs as cfg
from sidecar.evaluation.dataset import forum_digest, load_dataset
from sidecar.evaluation.evaluate import run_evaluation
from sidecar.evaluation.related import run_related_eval
from sidecar.evaluation.state import prepare_state
from sidecar.evaluation.zones import run_zones
from sidecar.runtime.machine import machine
from sidecar.training import embed_compare as compare
from sidecar.training.embed_run import EmbedOptions, train_forum_embedder
from sidecar.training.for_eval import judged_topics

log = logging.getLogger(__name__)

CONFIGS = (cfg.SERVED, cfg.DEFAULT_BASELINE)  # the served search, and the semantic leg alone
PARTS = ("retrieval", "zones", "related")


def eval_embedder_name(dump: Path, options: EmbedOptions) -> str:
    """The tuned model's name: the dump's forum and the options (the same ones reuse it)."""
    key = json.dumps({"forum": forum_digest(dump.resolve()), "init": options.init,
                      "budget": options.budget_s, "epochs": options.epochs,
                      "max_length": options.max_length, "batch": options.batch_size,
                      "lr": options.lr, "mix": options.mix, "rules": asdict(options.rules),
                      "quantize": options.quantize}, sort_keys=True)
    return "eval-embedder-" + hashlib.sha256(key.encode()).hexdigest()[:12]


def tuned_for_eval(settings: Settings, dump: Path, options: EmbedOptions, *,
                   progress: bool = True) -> tuple[Path, dict[str, Any]]:
    """The folder of an embedder tuned on ``dump``'s forum (trained now, or reused) and its
    training record. The evaluation's split is fixed (seed "eval"): nothing is held out but
    the judged topics, which are never read."""
    name = eval_embedder_name(dump, options)
    state = prepare_state(settings, dump.resolve(), progress=progress)
    try:
        res = state.resources
        model_dir = res.settings.models_dir / name
        try:
            training = read_manifest(model_dir).training
        except ModelLoadError:
            training = None
        if training:
            log.info("reusing %s (trained %s)", model_dir, training.get("trained_at"))
            return model_dir, training
        outcome = train_forum_embedder(res, replace(options, name=name, held_share=0.0,
                                                    seed="eval",
                                                    exclude=judged_topics(dump)),
                                       progress=progress)
        return outcome.model_dir, outcome.record
    finally:
        state.close()


def tuned_settings(settings: Settings, model_dir: Path) -> Settings:
    """``settings`` serving the tuned model of ``model_dir`` in process."""
    return settings.model_copy(update={"embed_model": model_dir.name,
                                       "embed_model_path": model_dir, "embed_source": None,
                                       "embed_url": None})


def run_embedder_eval(settings: Settings, dump: Path, options: EmbedOptions, *,
                      parts: Sequence[str] = PARTS, query_fields: Sequence[str] = ("text",),
                      ood: Sequence[Path] = (), resamples: int = 2000, seed: int = 0,
                      progress: bool = True) -> dict[str, Any]:
    """Tune, then evaluate before and after; returns the result document."""
    started = time.perf_counter()
    dump = dump.resolve()
    model_dir, record = tuned_for_eval(settings, dump, options, progress=progress)
    models = {"before": settings, "after": tuned_settings(settings, model_dir)}
    doc: dict[str, Any] = {
        "meta": {"dump": str(dump), "base": settings.embed_model, "tuned": model_dir.name,
                 "training": record, "parts": list(parts), "query_fields": list(query_fields),
                 "ood": [str(p) for p in ood], "resamples": resamples, "seed": seed,
                 "machine": machine(), "date": datetime.now(UTC).isoformat(timespec="seconds")}}
    if "retrieval" in parts:
        doc["retrieval"] = {}
        for fields in query_fields:
            runs = {side: run_evaluation(s, dump, config_names=CONFIGS, resamples=resamples,
                                         seed=seed, query_fields=fields, progress=progress)
                    for side, s in models.items()}
            doc["retrieval"][fields] = compare.retrieval(runs["before"], runs["after"],
                                                         resamples=resamples, seed=seed)
    if "zones" in parts:
        runs = {side: run_zones(s, dump, ood=ood, seed=seed, resamples=resamples,
                                progress=progress) for side, s in models.items()}
        doc["zones"] = compare.zones(runs["before"], runs["after"], resamples=resamples,
                                     seed=seed)
    if "related" in parts:
        runs = {side: run_related_eval(s, dump, ood=tuple(ood), seed=seed, resamples=resamples,
                                       progress=progress) for side, s in models.items()}
        doc["related"] = compare.related(runs["before"], runs["after"], resamples=resamples,
                                         seed=seed)
    doc["meta"]["queries"] = len(load_dataset(dump).scored())
    doc["meta"]["duration_s"] = round(time.perf_counter() - started)
    return doc


def _cell(entry: dict[str, Any] | None) -> str:
    if not entry:
        return "–"
    mark = " *" if entry.get("significant") else ""
    return (f"{entry['before']:.3f} → {entry['after']:.3f} ({entry['difference']:+.3f} "
            f"[{entry['ci'][0]:+.3f}, {entry['ci'][1]:+.3f}]{mark})")


def to_markdown(doc: dict[str, Any]) -> str:
    """The before/after tables (``*``: the 95% CI of the difference excludes 0)."""
    meta = doc["meta"]
    run = meta["training"].get("run", {})
    config = meta["training"].get("config", {})
    lines = [f"## The embedder tuned on {Path(meta['dump']).name}: before and after", "",
             f"Base `{meta['base']}`, tuned `{meta['tuned']}`: {run.get('pairs_seen')} pairs, "
             f"{run.get('seconds')} s, {run.get('pairs_per_s')} pairs/s, "
             f"{config.get('epochs')} epoch(s), mix {config.get('mix')}. {meta['queries']} "
             f"judged questions; paired bootstrap 95% CIs ({meta['resamples']} resamples); "
             "`*`: excludes 0.", ""]
    for fields, configs in doc.get("retrieval", {}).items():
        lines += [f"### Retrieval, query `{fields}`", "",
                  "| configuration | " + " | ".join(compare.RETRIEVAL_METRICS) + " |",
                  "|---" * (len(compare.RETRIEVAL_METRICS) + 1) + "|"]
        for config, row in configs.items():
            lines.append(f"| {config} | " + " | ".join(_cell(row.get(m))
                                                       for m in compare.RETRIEVAL_METRICS) + " |")
        lines.append("")
    zones = doc.get("zones")
    if zones:
        lines += ["### Zones (each model calibrated on opening posts, the tuned one on topics it "
                  "never read)", "",
                  "| measure | before → after (difference [CI]) |", "|---|---|"]
        for side in ("leave_out", "out_of_domain"):
            auroc = zones.get(f"auroc_{side}")
            if auroc:
                d = auroc["difference"]
                mark = " *" if d["ci_low"] > 0 or d["ci_high"] < 0 else ""
                lines.append(f"| AUROC answerable vs {side} | {auroc['before']['auroc']:.3f} → "
                             f"{auroc['after']['auroc']:.3f} ({d['difference']:+.3f} "
                             f"[{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]{mark}) |")
        for name in ("answerable_normal", "leave_out_held_back", "out_of_domain_abstain"):
            if name in zones:
                lines.append(f"| {name.replace('_', ' ')} | {_cell(zones[name])} |")
        lines.append("")
    related = doc.get("related")
    if related:
        lines += ["### Related topics", "", "| system | MRR@10 | Hit@5 |", "|---|---|---|"]
        for system, row in related.items():
            lines.append(f"| {system} | {_cell(row['mrr@10'])} | {_cell(row['hit@5'])} |")
        lines.append("")
    return "\n".join(lines)
