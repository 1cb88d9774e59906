"""`sidecar bench --part train-embedder`: what tuning the embedder costs, and its night.

1. **Training**: `sidecar eval --train-embedder`'s training on an evaluation dump's forum (by
   default Qatar Living, no judged topic read): its stages, pairs/s and peak memory, from the
   model's training record (trained in this run unless the same model is already there); beside
   it, the same training code on a bge-m3-sized encoder (24 layers x 1,024, random weights) for a
   few steps: the pairs/s behind `train-embedder`'s refusal of such a model on a CPU.
2. **Re-embedding**: posts/s of the dump's public posts through the indexer (the backfill's
   step: text, tokens, model), the served model and the tuned one side by side in one run, and a
   bge-m3-sized encoder on a few posts.
3. **The night**: hours to re-embed 100k and 1M posts at each measured rate. A GPU host's rate is
   not measured here (this machine has none): run this part there (`SIDECAR_ONNX_PROVIDER=cuda`).
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from models import load_embedder
from models.presets import minilm_dir
from models.tiny import make_random_embedder, sized_bert_config
from sidecar.bench.report import BenchContext, BenchTable
from sidecar.db.embeddings import stored_vectors
from sidecar.evaluation.state import prepare_state
from sidecar.ingest.indexing import Indexer
from sidecar.runtime.resources import Resources
from sidecar.training.embed_eval import eval_embedder_name, tuned_for_eval
from sidecar.training.embed_pairs import EmbedPair
from sidecar.training.embed_run import EmbedOptions
from sidecar.training.embed_trainer import EmbedTrainConfig, train_embedder

log = logging.getLogger(__name__)

DEFAULT_DUMP = Path("../shared/eval/qatarliving")
FULL_POSTS, QUICK_POSTS = 2000, 200
BIG_POSTS, QUICK_BIG_POSTS = 16, 4
BIG_TRAIN_S, QUICK_BIG_TRAIN_S = 300.0, 60.0
NIGHTS = (100_000, 1_000_000)
BIG = {"layers": 24, "hidden": 1024, "heads": 16}  # bge-m3's encoder per token


def run(ctx: BenchContext) -> list[BenchTable]:
    """The three tables."""
    dump = Path(ctx.extras.get("dump") or DEFAULT_DUMP)
    minutes = float(ctx.extras.get("train_minutes") or (5 if ctx.quick else 60))
    options = EmbedOptions(budget_s=minutes * 60)
    had = (ctx.settings.state_dir / "eval" / "models" / eval_embedder_name(dump, options)
           / "manifest.json").is_file()
    model_dir, record = tuned_for_eval(ctx.settings, dump, options, progress=False)
    big_train = _train_big(ctx)
    state = prepare_state(ctx.settings, dump.resolve(), progress=False)
    try:
        rates = _embed_rates(ctx, state.resources, model_dir)
    finally:
        state.close()
    (ctx.out_dir / "train-embedder.json").write_text(json.dumps(
        {"training": record, "big_training": big_train, "embedding": rates}, indent=1))
    return [_training_table(record, big_train, dump, trained_now=not had),
            _embedding_table(rates), _night_table(rates)]


def _train_big(ctx: BenchContext) -> dict[str, Any]:
    """A few steps of the trainer on a bge-m3-sized encoder (random weights, MiniLM's
    tokenizer): its pairs/s and this process's peak memory."""
    # heavy dependency: transformers (the train extra), only for this table
    import transformers

    words = ("pool disk vdev raid mirror scrub backup snapshot replace resilver expand "
             "wireguard tunnel keepalive route nat vps relay port forward").split()
    rng = random.Random(0)
    pairs = [EmbedPair(" ".join(rng.choices(words, k=12)), " ".join(rng.choices(words, k=90)),
                       i, "reply", i) for i in range(64)]
    with tempfile.TemporaryDirectory(prefix="bench-big-") as tmp:
        init = Path(tmp) / "init"
        config = sized_bert_config(BIG["layers"], BIG["hidden"], BIG["heads"])
        model = transformers.BertModel(transformers.BertConfig(**config))
        parameters = int(model.num_parameters())
        model.save_pretrained(init)
        del model
        for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt",
                     "special_tokens_map.json"):
            shutil.copy2(minilm_dir() / name, init / name)
        budget = QUICK_BIG_TRAIN_S if ctx.quick else BIG_TRAIN_S
        trained = train_embedder(pairs, EmbedTrainConfig(init=init, batch_size=8, epochs=10,
                                                         budget_s=budget),
                                 Path(tmp) / "out", progress=False)
    return {**trained.as_dict(), "model": f"{BIG['layers']} layers x {BIG['hidden']}",
            "parameters": parameters}


def _rate(indexer: Indexer, post_ids: list[int]) -> float:
    """Posts/s of the model on the texts the indexer builds for these posts (what a backfill
    batch embeds), after one warm-up batch."""
    texts = indexer.prepare(post_ids).texts
    indexer.embedder.embed(texts[:8], kind="passage")
    started = time.perf_counter()
    for start in range(0, len(texts), 32):
        indexer.embedder.embed(texts[start:start + 32], kind="passage")
    return len(texts) / (time.perf_counter() - started)


def _embed_rates(ctx: BenchContext, res: Resources, model_dir: Path) -> dict[str, Any]:
    with res.db.connection() as conn:
        ids = [pid for pid, _ in stored_vectors(conn, res.model)]
    ids = ids[:QUICK_POSTS if ctx.quick else FULL_POSTS]
    tuned = load_embedder(model_dir, threads=res.settings.onnx_threads)
    out: dict[str, Any] = {"posts": len(ids)}
    out[res.model.name] = _rate(Indexer(res.db, res.embedder, res.model), ids)
    out[f"tuned ({model_dir.name})"] = _rate(Indexer(res.db, tuned, res.model), ids)
    with tempfile.TemporaryDirectory(prefix="bench-big-") as tmp:
        config = sized_bert_config(BIG["layers"], BIG["hidden"], BIG["heads"])
        make_random_embedder(Path(tmp), config, name="bge-m3-sized", max_length=512)
        big = load_embedder(Path(tmp), threads=res.settings.onnx_threads)
        few = ids[:QUICK_BIG_POSTS if ctx.quick else BIG_POSTS]
        out["bge-m3-sized (24 x 1,024, random weights), 512 tokens"] = _rate(
            Indexer(res.db, big, res.model), few)
    return out


def _training_table(record: dict[str, Any], big: dict[str, Any], dump: Path, *,
                    trained_now: bool) -> BenchTable:
    run_ = record.get("run", {})
    stages = record.get("seconds", {})
    rows: list[list[Any]] = [
        ["all-MiniLM-L6-v2 (the served model), on the forum's pairs", run_.get("pairs_seen"),
         run_.get("pairs_per_s"), run_.get("peak_rss_mb"),
         " / ".join(f"{k} {v} s" for k, v in stages.items())],
        [f"bge-m3-sized ({big['model']}, {big['parameters'] / 1e6:.0f}M parameters), "
         "random pairs", big["pairs_seen"], big["pairs_per_s"], big["peak_rss_mb"],
         f"training {big['seconds']} s"]]
    ratio = (run_.get("pairs_per_s") or 0) / max(big["pairs_per_s"], 1e-9)
    notes = [f"forum of {dump}: {record.get('pairs', {}).get('threads')} topics read, judged ones "
             f"never; stopped by {run_.get('stopped_by')}",
             "trained in this run" if trained_now else
             f"the model trained on {record.get('trained_at')} (same forum and options): its "
             "recorded figures",
             f"the bge-m3-sized encoder trains {ratio:.0f}x slower than MiniLM here; peak memory "
             "is this process's high-water mark (ru_maxrss), which includes what ran before"]
    return BenchTable("train-embedder", "Tuning the embedder: training",
                      ["model", "pairs", "pairs/s", "peak MB", "stages"], rows, notes)


def _embedding_table(rates: dict[str, Any]) -> BenchTable:
    models = [k for k in rates if k != "posts"]
    base = rates[models[0]]
    rows = [[name, round(rates[name], 1), round(rates[name] / base, 2)] for name in models]
    return BenchTable("train-embedder", "Re-embedding: posts/s through the indexer's step",
                      ["model", "posts/s", "x the served model"], rows,
                      [f"{rates['posts']} public posts of the forum (the bge-m3-sized one: the "
                       "first few), strategy 1 texts, batches of 32, ONNX Runtime on this CPU, "
                       "side by side in one run"])


def _night_table(rates: dict[str, Any]) -> BenchTable:
    rows = [[name, *(round(posts / rates[name] / 3600, 1) for posts in NIGHTS)]
            for name in rates if name != "posts"]
    rows.append(["a GPU host", *("not measured here" for _ in NIGHTS)])
    return BenchTable("train-embedder", "The re-embedding night: hours at the measured rates",
                      ["model", *(f"{n:,} posts (h)" for n in NIGHTS)], rows,
                      ["this machine has no GPU: run `sidecar bench --part train-embedder` on "
                       "the GPU host (SIDECAR_ONNX_PROVIDER=cuda) for its row; the backfill's "
                       "own overhead (the jobs, writes) is measured by --part backfill (6%)"])
