"""`sidecar eval --train-reranker`: a reranker trained on the forum built from a dump, first.

The forum of an evaluation dump is imported as for any evaluation; a reranker is trained on it
with the product's own command path (:func:`sidecar.training.run.train_forum_reranker`), never
reading a topic judged relevant to one of the dump's questions (nor, of course, the questions:
they are not in the forum), so no evaluation question or its answer reaches training. The
model is kept under the evaluation's models folder, named after the dump's forum and the
options, and reused while they are unchanged; the evaluation then runs with it as the served
cross-encoder, beside the cosine.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from models.errors import ModelLoadError
from models.manifest import read_manifest
from sidecar.config.settings import Settings
from sidecar.evaluation.dataset import forum_digest, load_dataset
from sidecar.evaluation.state import prepare_state
from sidecar.training.run import TrainOptions, train_forum_reranker

log = logging.getLogger(__name__)
# An evaluation trains on a dump, which no member can write to: its split is fixed, so the same
# dump and options name (and reuse) the same model.
EVAL_SEED = "forum-reranker"


def judged_topics(dump: Path) -> frozenset[int]:
    """Every topic judged relevant (grade >= 1) to one of the dump's questions."""
    dataset = load_dataset(dump.resolve())
    return frozenset(t for q in dataset.queries for t, g in q.topics.items() if g >= 1)


def eval_model_name(dump: Path, options: TrainOptions) -> str:
    """The model's name: the dump's forum and the options (the same ones reuse the model)."""
    key = json.dumps({"forum": forum_digest(dump.resolve()), "init": options.init,
                      "budget": options.budget_s, "max_pairs": options.max_pairs,
                      "epochs": options.epochs, "max_length": options.max_length,
                      "rules": asdict(options.rules), "seed": options.seed or EVAL_SEED},
                     sort_keys=True)
    return "eval-reranker-" + hashlib.sha256(key.encode()).hexdigest()[:12]


def trained_for_eval(settings: Settings, dump: Path, options: TrainOptions, *,
                     progress: bool = True) -> tuple[Path, dict[str, Any]]:
    """The model directory of a reranker trained on ``dump``'s forum (trained now, or reused),
    and its training record."""
    name = eval_model_name(dump, options)
    state = prepare_state(settings, dump.resolve(), progress=progress)
    try:
        res = state.resources
        model_dir = res.settings.models_dir / name
        try:
            manifest = read_manifest(model_dir)
        except ModelLoadError:
            manifest = None
        if manifest is not None and manifest.training and "held_out" in manifest.training:
            log.info("reusing %s (trained %s)", model_dir, manifest.training.get("trained_at"))
            return model_dir, manifest.training
        if model_dir.exists():
            # This evaluation's own model left unfinished (a run stopped before its guard): its
            # name is a digest of the dump and options, so nothing else can be in that folder.
            # A training run never replaces a folder itself.
            log.warning("removing %s: an unfinished evaluation model", model_dir)
            shutil.rmtree(model_dir)
        options = replace(options, name=name, exclude=judged_topics(dump),
                          seed=options.seed or EVAL_SEED)
        outcome = train_forum_reranker(res, options, progress=progress)
        return outcome.model_dir, outcome.record
    finally:
        state.close()
