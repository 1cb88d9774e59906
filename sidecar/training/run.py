"""`sidecar train-reranker`: mine the forum's pairs, train, export, judge held out, promote.

One function, :func:`train_forum_reranker`, that the command and the evaluation share: the
evaluation trains on the forum built from a dump (``exclude``: every topic judged relevant to
one of its questions, so no evaluation question or its answer reaches training) and then
measures with the model beside the cosine.
"""

from __future__ import annotations

import logging
import random
import secrets
import tempfile
import time
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from psycopg.conninfo import conninfo_to_dict

from models import load_reranker
from models.names import InvalidModelName, ModelExists, new_model_dir
from models.presets import find_preset, package_model_dir
from models.protocols import Reranker
from sidecar.config.settings import Settings
from sidecar.core.rerank_score import Residual
from sidecar.db.training_read import thread_count
from sidecar.errors import InvalidInput
from sidecar.runtime.resources import Resources
from sidecar.training.export import export_reranker, record_figures, residual_record
from sidecar.training.guard import Scorer, Verdict, judge
from sidecar.training.mining import MiningRules, Pair
from sidecar.training.promote import promoted_entry
from sidecar.training.source import mine
from sidecar.training.trainer import TrainConfig, Trained, fit_residual, train

log = logging.getLogger(__name__)

# Public topics with a reply a forum needs before training is worth it: below this the held-out
# side is too small to judge and the model memorises a handful of threads.
MIN_THREADS = 300


class ForumTooSmall(InvalidInput):
    """The forum has too few public threads to train a reranker from."""


@dataclass(frozen=True)
class TrainOptions:
    """What ``sidecar train-reranker`` takes."""

    init: str = "all-MiniLM-L6-v2"
    name: str | None = None  # default: forum-reranker-<UTC time>
    max_threads: int = 5000
    max_pairs: int = 40_000
    budget_s: float | None = 3600.0
    epochs: float = 1.0
    max_length: int = 160
    held_share: float = 0.15
    # Which topics are held out, and the order pairs are capped in. None: a fresh random seed
    # per run (recorded), so nobody can know in advance which topics the guard measures on.
    seed: str | None = None
    quantize: bool = True
    rules: MiningRules = field(default_factory=MiningRules)
    exclude: Collection[int] = ()  # topics never read (the evaluation's judged ones)


@dataclass
class TrainingOutcome:
    """What was trained, where it is, and the guard's verdict."""

    model_dir: Path
    name: str
    verdict: Verdict
    record: dict[str, Any]
    seconds: float


class _Stopwatch:
    """Wall time of each stage, for the record (and `sidecar bench --part rerank`)."""

    def __init__(self) -> None:
        self.laps: dict[str, float] = {}
        self._last = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps[name] = round(now - self._last, 1)
        self._last = now


def split_seed(options: TrainOptions) -> str:
    """The run's seed: the options' when given (evaluations, tests), else a fresh one."""
    return options.seed if options.seed is not None else secrets.token_hex(8)


def new_reranker_dir(settings: Settings, name: str) -> Path:
    """The folder a new reranker ``name`` goes to, checked before anything is mined: a plain
    name (:mod:`models.names`), no folder of that name yet, and never the name of the promoted
    reranker or of the one before it (their zones and traces are keyed by name, so a model
    the guard refused would be served in their place). Raises :class:`InvalidInput`."""
    try:
        out = new_model_dir(settings.models_dir, name)
    except (InvalidModelName, ModelExists) as exc:
        raise InvalidInput(str(exc)) from exc
    served = promoted_entry(settings)
    taken = [] if served is None else [served.name, *([served.previous.get("name")]
                                                       if served.previous else [])]
    if name in taken:
        raise InvalidInput(f"{name!r} names the promoted reranker (or the one before it, kept "
                           "for `sidecar reranker rollback`): choose another name")
    return out


def init_dir(init: str) -> Path:
    """The folder of the model to start from: an installed model package by name, or a path."""
    path = Path(init).expanduser()
    if path.is_dir():
        return path.resolve()
    preset = find_preset(init)
    if preset is None or preset.package is None:
        raise InvalidInput(f"--init {init!r} is neither a folder nor an installed model "
                           "package (e.g. all-MiniLM-L6-v2)")
    return package_model_dir(preset.package)


def is_cross_encoder(directory: Path) -> bool:
    """Whether a checkpoint already has a relevance head (fine-tuned as it is, no residual)."""
    config = (directory / "config.json").read_text(encoding="utf-8")
    return "ForSequenceClassification" in config


def forum_name(res: Resources) -> str:
    """How the record names the forum: its URL, else its database (never credentials)."""
    if res.settings.forum_url:
        return res.settings.forum_url
    info = conninfo_to_dict(res.urls.database_url)
    return f"database {info.get('dbname', '?')} on {info.get('host', 'localhost')}"


def cap_pairs(pairs: Sequence[Pair], limit: int, rng: random.Random) -> list[Pair]:
    """At most ``limit`` pairs, whole questions at a time (a question keeps all its pairs)."""
    groups: dict[tuple[int, str], list[Pair]] = {}
    for p in pairs:
        groups.setdefault((p.topic_id, p.question), []).append(p)
    keys = sorted(groups)
    rng.shuffle(keys)
    out: list[Pair] = []
    for key in keys:
        if len(out) + len(groups[key]) > limit:
            break
        out.extend(groups[key])
    return out


def scorer_of(reranker: Reranker, residual: Residual | None) -> Scorer:
    """Score pairs with a cross-encoder, as the pipeline does (its residual added)."""
    def score(pairs: Sequence[Pair]) -> list[float]:
        out: list[float] = []
        for question, group in _by_question(pairs):
            raw = np.asarray(reranker.score(question, [p.passage for p in group]))
            raw = raw[:, 0] if raw.ndim == 2 else raw
            out.extend((residual.score(float(v), p.cosine) if residual else float(v))
                       for v, p in zip(raw, group, strict=True))
        return out
    return score


def _by_question(pairs: Sequence[Pair]) -> list[tuple[str, list[Pair]]]:
    # Consecutive pairs of one question are scored in one call (mining writes them together).
    out: list[tuple[str, list[Pair]]] = []
    for p in pairs:
        if out and out[-1][0] == p.question:
            out[-1][1].append(p)
        else:
            out.append((p.question, [p]))
    return out


def _cosine(pairs: Sequence[Pair]) -> list[float]:
    return [p.cosine for p in pairs]


def train_forum_reranker(res: Resources, options: TrainOptions, *,
                         progress: bool = True) -> TrainingOutcome:
    """Mine, train, export and judge a reranker for the forum behind ``res`` (not promoted
    here: :mod:`sidecar.training.promote`). Raises :class:`ForumTooSmall`, and
    :class:`InvalidInput` for a name that is not a new plain one (:func:`new_reranker_dir`)."""
    started = time.monotonic()
    name = options.name or f"forum-reranker-{datetime.now(UTC):%Y%m%dT%H%M%S}"
    out_dir = new_reranker_dir(res.settings, name)  # before an hour of training, not after
    with res.db.connection() as conn:
        threads = thread_count(conn)
    usable = threads - len(options.exclude)
    if usable < MIN_THREADS:
        raise ForumTooSmall(
            f"this forum has {usable} public topics with a reply to train from; a reranker "
            f"needs at least {MIN_THREADS} (the cosine stays the relevance score)")
    clock = _Stopwatch()
    seed = split_seed(options)
    mined = mine(res, rules=options.rules, max_threads=options.max_threads,
                 held_share=options.held_share, seed=seed, exclude=options.exclude,
                 progress=progress)
    clock.lap("mining")
    if not mined.train or not mined.held:
        raise ForumTooSmall(f"mining found {len(mined.train)} training and {len(mined.held)} "
                            "held-out pairs: too few answered threads to train from")
    source = init_dir(options.init)
    residual = None if is_cross_encoder(source) else fit_residual(
        mined.train, res.model.name, res.settings.strategy)
    pairs = cap_pairs(mined.train, options.max_pairs, random.Random(seed))
    config = TrainConfig(init=source, max_length=options.max_length, epochs=options.epochs,
                         budget_s=options.budget_s)
    now = datetime.now(UTC)
    with tempfile.TemporaryDirectory(prefix="sidecar-train-") as tmp:
        trained = train(pairs, config, Path(tmp) / "checkpoint", residual=residual,
                        progress=progress)
        clock.lap("training")
        record = _record(res, options, mined, trained, now, len(pairs), seed)
        model_dir = export_reranker(trained.directory, out_dir, name=name,
                                    quantize=options.quantize, training=record)
        clock.lap("export")
    verdict = judge_against_served(res, model_dir, residual, mined.held)
    clock.lap("guard")
    record["held_out"] = verdict.figures
    record["seconds"] = clock.laps
    record_figures(model_dir, verdict.figures, seconds=clock.laps)
    return TrainingOutcome(model_dir=model_dir, name=name, verdict=verdict, record=record,
                           seconds=time.monotonic() - started)


def judge_against_served(res: Resources, model_dir: Path, residual: Residual | None,
                         held: Sequence[Pair]) -> Verdict:
    """The guard: the new model (its exported ONNX graph, as it will be served) against what
    is served now (the configured or promoted cross-encoder, else the cosine)."""
    new = load_reranker(model_dir, threads=res.settings.onnx_threads)
    served = res.reranker
    if served is not None:
        old_score, old_name = scorer_of(served, res.reranker_residual), \
            f"cross-encoder:{served.name}"
    else:
        old_score, old_name = _cosine, f"bi-encoder:{res.model.name}"
    return judge(held, scorer_of(new, residual), old_score, served_name=old_name,
                 new_name=f"cross-encoder:{new.name}")


def _record(res: Resources, options: TrainOptions, mined: Any, trained: Trained,
            now: datetime, used: int, seed: str) -> dict[str, Any]:
    return {"initialised_from": options.init, "forum": forum_name(res), "seed": seed,
            "trained_at": now.isoformat(timespec="seconds"),
            "pairs": {**mined.as_dict(), "trained_on": used},
            "rules": asdict(options.rules),
            "config": {"max_length": options.max_length, "epochs": options.epochs,
                       "budget_s": options.budget_s, "max_pairs": options.max_pairs,
                       "held_share": options.held_share, "quantized": options.quantize,
                       "excluded_topics": len(options.exclude)},
            "run": trained.as_dict(), "residual": residual_record(trained.residual)}
