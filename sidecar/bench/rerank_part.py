"""`sidecar bench --part rerank`: what the forum's own reranker costs.

1. **Training**: `sidecar eval --train-reranker`'s training on an evaluation dump's forum (by
   default Qatar Living, 15k posts; no judged topic read): its stages' wall time, from the
   model's training record (trained in this run unless the same model is already there: the
   table says which).
2. **Latency added to ``/v1/retrieve``**: the dump's questions assessed as the pipeline does
   (wide search, rerank, zone), once without the reranker and once with it, side by side in one
   run, for several candidate counts (topics reranked, two posts each) and input lengths (the
   model's ``max_length``, the same graph): p50/p95 of the rerank step (from the trace) and of
   the whole assessment, with the bi-encoder-only assessment as the baseline.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from models import load_reranker
from models.manifest import read_manifest, write_manifest
from sidecar.bench.report import BenchContext, BenchTable
from sidecar.core.trace import Trace
from sidecar.evaluation.dataset import load_dataset
from sidecar.evaluation.state import prepare_state
from sidecar.runtime.model_loading import residual_of
from sidecar.runtime.resources import Resources
from sidecar.training.for_eval import trained_for_eval
from sidecar.training.run import TrainOptions

DEFAULT_DUMP = Path("../shared/eval/qatarliving")
CANDIDATES = (10, 20, 40)
LENGTHS = (96, 160, 256)
FULL_QUESTIONS, QUICK_QUESTIONS = 100, 20
LIMIT = 3  # evidence kept: with 3, the candidates are exactly rerank_candidates_min


def run(ctx: BenchContext) -> list[BenchTable]:
    """Both tables."""
    dump = Path(ctx.extras.get("dump") or DEFAULT_DUMP)
    minutes = float(ctx.extras.get("train_minutes") or (5 if ctx.quick else 60))
    had = _existing(ctx, dump, minutes)
    model_dir, record = trained_for_eval(ctx.settings, dump, TrainOptions(budget_s=minutes * 60),
                                         progress=False)
    tables = [_training_table(record, dump, trained_now=not had)]
    questions = [" ".join(q.text.split())[:500] for q in load_dataset(dump.resolve()).queries]
    questions = questions[:QUICK_QUESTIONS if ctx.quick else FULL_QUESTIONS]
    state = prepare_state(ctx.settings, dump.resolve(), progress=False)
    try:
        tables.append(_latency_table(ctx, state.resources, model_dir, questions))
    finally:
        state.close()
    return tables


def _existing(ctx: BenchContext, dump: Path, minutes: float) -> bool:
    # heavy dependency: the evaluation's state and dataset readers, only for this part
    from sidecar.training.for_eval import eval_model_name

    name = eval_model_name(dump, TrainOptions(budget_s=minutes * 60))
    return (ctx.settings.state_dir / "eval" / "models" / name / "manifest.json").is_file()


def _training_table(record: dict[str, Any], dump: Path, *, trained_now: bool) -> BenchTable:
    stages = record.get("seconds", {})
    run_ = record.get("run", {})
    pairs = record.get("pairs", {})
    rows = [[name, stages.get(name)] for name in ("mining", "training", "export", "guard")]
    rows.append(["total", round(sum(v for v in stages.values() if v is not None), 1)])
    excluded = record.get("config", {}).get("excluded_topics")
    notes = [f"forum of {dump} ({pairs.get('threads')} topics read, {excluded} judged ones "
             "never read); "
             f"{run_.get('pairs_seen')} pairs trained on in {run_.get('steps')} steps, stopped by "
             f"{run_.get('stopped_by')}; initialised from {record.get('initialised_from')}",
             "trained in this run" if trained_now else
             f"the model trained on {record.get('trained_at')} (same forum and options): its "
             "recorded times"]
    return BenchTable("rerank", "The forum's reranker: training time", ["stage", "seconds"],
                      rows, notes)


def _variant(res: Resources, model_dir: Path | None, candidates: int) -> Resources:
    """The same resources with another reranker (or none) and candidate count."""
    settings = res.settings.model_copy(update={"rerank_candidates_min": candidates})
    loaded = res.loaded_models()
    reranker = load_reranker(model_dir, threads=settings.onnx_threads) if model_dir else None
    residual = residual_of(reranker, res.model, settings.strategy) if reranker else None
    if reranker is not None:
        reranker.warmup()
    loaded = dataclasses.replace(loaded, reranker=reranker, reranker_error=None,
                                 residual=residual)
    return dataclasses.replace(res, settings=settings, loaded=loaded)


def _timings(res: Resources, questions: list[str]) -> tuple[list[float], list[float]]:
    """Per question: the rerank step's ms and the whole assessment's ms."""
    pipeline = res.retrieval()
    pipeline.assess(questions[0], LIMIT, Trace())  # warm-up
    rerank, total = [], []
    for q in questions:
        trace = Trace()
        pipeline.assess(q, LIMIT, trace)
        steps = {s["step"]: s["ms"] for s in trace.as_list()}
        rerank.append(float(steps.get("rerank", 0.0)))
        total.append(float(sum(steps.values())))
    return rerank, total


def _latency_table(ctx: BenchContext, res: Resources, model_dir: Path,
                   questions: list[str]) -> BenchTable:
    rows: list[list[Any]] = []
    raw: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-rerank-") as tmp:
        for candidates in CANDIDATES:
            base_rerank, base_total = _timings(_variant(res, None, candidates), questions)
            rows.append([candidates, "none (cosine)", _p(base_rerank, 50), _p(base_rerank, 95),
                         _p(base_total, 50), _p(base_total, 95), 0.0])
            for length in LENGTHS:
                variant_dir = Path(tmp) / f"len{length}"
                if not variant_dir.exists():
                    shutil.copytree(model_dir, variant_dir)
                    manifest = read_manifest(variant_dir)
                    write_manifest(variant_dir, manifest.replace(max_length=length))
                rr, total = _timings(_variant(res, variant_dir, candidates), questions)
                added = [t - b for t, b in zip(total, base_total, strict=True)]
                rows.append([candidates, f"{length} tokens", _p(rr, 50), _p(rr, 95), _p(total, 50),
                             _p(total, 95), _p(added, 95)])
                raw[f"{candidates}:{length}"] = {"rerank_ms": rr, "total_ms": total}
    (ctx.out_dir / "rerank.json").write_text(json.dumps(raw, indent=1))
    return BenchTable(
        "rerank", "The forum's reranker: latency added to /v1/retrieve's assessment",
        ["topics reranked (2 posts each)", "cross-encoder input", "rerank p50 ms",
         "rerank p95 ms", "assessment p50 ms", "assessment p95 ms", "added p95 ms"], rows,
        [f"{len(questions)} questions of {res.settings.state_dir}'s evaluation forum, one "
         f"process, ONNX Runtime on {res.settings.onnx_provider} "
         f"({res.settings.onnx_threads or 'all'} threads), int8 graph; the same questions "
         "without a reranker (cosine) in the same run are the baseline",
         "added p95 = 95th percentile of (assessment with it - without it), per question"])


def _p(values: list[float], q: int) -> float:
    return round(float(np.percentile(values, q)), 1) if values else 0.0
