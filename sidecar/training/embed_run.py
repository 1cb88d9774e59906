"""`sidecar train-embedder`: mine the forum's pairs, fine-tune the bi-encoder, export, register.

One function, :func:`train_forum_embedder`, that the command, the evaluation and the benchmark
share. The result is a **new model version**: an ONNX model folder under the models folder, with
its own name, registered beside the served one, so its vectors are written next to the served
vectors (never over them) by the ordinary backfill. Serving it is a separate, explicit step
(:mod:`sidecar.training.embed_promote`).
"""

from __future__ import annotations

import logging
import tempfile
import time
from collections.abc import Collection
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from models.manifest import read_manifest, write_manifest
from models.names import InvalidModelName, ModelExists, new_model_dir
from models.prepare import prepare_model, resolve_source
from sidecar.db.embeddings import RegisteredModel
from sidecar.db.training_read import thread_count
from sidecar.errors import Conflict, InvalidInput
from sidecar.runtime.model_loading import resolve_model
from sidecar.runtime.resources import Resources
from sidecar.runtime.served_model import configured_settings
from sidecar.training.embed_pairs import EmbedRules
from sidecar.training.embed_source import EmbedMined, fresh_seed, mine_embed_pairs
from sidecar.training.embed_trainer import EmbedTrainConfig, EmbedTrained, train_embedder
from sidecar.training.run import ForumTooSmall, forum_name

log = logging.getLogger(__name__)

# Parameters above which a CPU trains too slowly to be worth it (bge-m3 has 568M). Measured
# side by side on 2 vCPUs (`sidecar bench --part train-embedder`, 128 tokens, batches of 32):
# all-MiniLM-L6-v2 trains at 4.5 pairs/s, an encoder of bge-m3's shape (24 layers x 1,024) at
# 0.39, so a few thousand pairs take a night. A GPU host trains them (--device cuda).
CPU_MAX_PARAMS = 150_000_000
CPU_PAIRS_PER_S_MINILM = 4.5
CPU_PAIRS_PER_S_BGE_M3_SHAPE = 0.39


@dataclass(frozen=True)
class EmbedOptions:
    """What ``sidecar train-embedder`` takes."""

    init: str | None = None  # default: the served model's own checkpoint
    name: str | None = None  # default: forum-embedder-<UTC time>
    max_threads: int = 50_000
    budget_s: float | None = 3600.0
    epochs: float = 1.0
    max_length: int = 128
    batch_size: int = 32
    lr: float = 2e-5
    mix: float = 1.0
    held_share: float = 0.1
    seed: str | None = None  # default: a fresh one (recorded); the split must not be guessable
    device: str = "cpu"
    quantize: str | None = None  # None: as the served model is prepared (its manifest)
    rules: EmbedRules = field(default_factory=EmbedRules)
    exclude: Collection[int] = ()  # topics never read (the evaluation's judged ones)
    held: Collection[int] = ()  # topics read for nothing: held out for the guard


@dataclass
class EmbedOutcome:
    """What was trained and where it is."""

    model_dir: Path
    model: RegisteredModel
    record: dict[str, Any]
    seconds: float


def served_checkpoint(res: Resources) -> Path:
    """The Hugging Face folder the configured model was prepared from: every run tunes the
    configured model afresh, never a tuned one again (errors would compound)."""
    configured = configured_settings(res.settings, res.served)
    manifest = read_manifest(configured.embed_dir())
    source = manifest.source or configured.embed_source or configured.embed_model
    _, local, _ = resolve_source(source)
    if local is None or not (local / "config.json").is_file():
        raise InvalidInput(
            f"the served model {manifest.name} was prepared from {source!r}, which is not a "
            "local Hugging Face folder: pass --init PATH (its folder with config.json and "
            "safetensors)")
    return local


def init_folder(res: Resources, init: str | None) -> Path:
    """The folder to start from: ``init`` (a path or an installed model package), else the
    served model's own checkpoint."""
    if init is None:
        return served_checkpoint(res)
    _, local, _ = resolve_source(init)
    if local is None or not (local / "config.json").is_file():
        raise InvalidInput(f"--init {init!r} is neither a Hugging Face folder (config.json) nor "
                           "an installed model package (e.g. all-MiniLM-L6-v2)")
    return local


def parameter_count(folder: Path) -> int:
    """The checkpoint's parameters, from the sizes of its weight files (no load)."""
    files = list(folder.glob("*.safetensors")) or list(folder.glob("pytorch_model*.bin"))
    if not files:
        raise InvalidInput(f"{folder} holds no weights (*.safetensors)")
    bytes_per = 2 if "float16" in (folder / "config.json").read_text(encoding="utf-8") else 4
    return sum(f.stat().st_size for f in files) // bytes_per


def check_device(folder: Path, device: str) -> None:
    """Refuse a model too large for a CPU (with the numbers), or a GPU torch cannot see."""
    if device.startswith("cuda"):
        # heavy dependency: torch (the train extra), only to see whether a GPU is there
        import torch

        if not torch.cuda.is_available():
            raise InvalidInput("--device cuda: torch sees no CUDA device on this machine "
                               "(install torch's CUDA build on the GPU host)")
        return
    params = parameter_count(folder)
    if params > CPU_MAX_PARAMS:
        rate = CPU_PAIRS_PER_S_BGE_M3_SHAPE
        raise InvalidInput(
            f"{folder.name} has about {params / 1e6:.0f}M parameters: an encoder of bge-m3's "
            f"shape trains at {rate} pairs/s on 2 vCPUs (all-MiniLM-L6-v2 at "
            f"{CPU_PAIRS_PER_S_MINILM}, measured side by side by `sidecar bench --part "
            f"train-embedder`), {3000 / rate / 3600:.1f} h for 3,000 pairs. Train it on a GPU "
            "host (`--device cuda`, docs/models.md), or tune a smaller "
            f"model; CPUs take models up to {CPU_MAX_PARAMS / 1e6:.0f}M parameters")


def default_name(now: datetime) -> str:
    """``forum-embedder-<UTC time>``."""
    return f"forum-embedder-{now:%Y%m%dT%H%M%S}"


def train_forum_embedder(res: Resources, options: EmbedOptions, *,
                         progress: bool = True) -> EmbedOutcome:
    """Mine, train, export and register a tuned embedder for the forum behind ``res``.

    Raises :class:`ForumTooSmall` below the minimum of threads, :class:`InvalidInput` for a
    model too large for the device, :class:`Conflict` for a name already taken.
    """
    started = time.monotonic()
    now = datetime.now(UTC)
    name = options.name or default_name(now)
    try:
        model_dir = new_model_dir(res.settings.models_dir, name)
    except InvalidModelName as exc:
        raise InvalidInput(str(exc)) from exc
    except ModelExists as exc:
        raise Conflict(str(exc)) from exc
    if name in (res.model.name, configured_settings(res.settings, res.served).embed_model):
        raise Conflict(f"{name!r} names the served or the configured model: models are never "
                       "overwritten; choose another --name")
    minimum = res.settings.train_min_threads
    with res.db.connection() as conn:
        usable = thread_count(conn) - len(options.exclude)
    if usable < minimum:
        raise ForumTooSmall(
            f"this forum has {usable} public topics with a reply to learn from; tuning the "
            f"embedder needs at least {minimum} (the served model stays as it is)")
    init = init_folder(res, options.init)
    check_device(init, options.device)
    seed = options.seed or fresh_seed()
    laps: dict[str, float] = {}
    t0 = time.monotonic()
    mined = mine_embed_pairs(res, rules=options.rules, max_threads=options.max_threads,
                             held_share=options.held_share, seed=seed, exclude=options.exclude,
                             held=options.held, progress=progress)
    laps["mining"] = round(time.monotonic() - t0, 1)
    if len(mined.train) < 2 * options.batch_size:
        raise ForumTooSmall(f"mining found {len(mined.train)} pairs: too few answered threads "
                            "to learn from")
    config = EmbedTrainConfig(init=init, max_length=options.max_length, epochs=options.epochs,
                              batch_size=options.batch_size, lr=options.lr, mix=options.mix,
                              budget_s=options.budget_s, device=options.device)
    quantize = options.quantize or read_manifest(res.settings.embed_dir()).quantization
    with tempfile.TemporaryDirectory(prefix="sidecar-embedder-") as tmp:
        t0 = time.monotonic()
        trained = train_embedder(mined.train, config, Path(tmp) / "checkpoint",
                                 progress=progress)
        laps["training"] = round(time.monotonic() - t0, 1)
        t0 = time.monotonic()
        prepare_model(str(trained.directory), "embed", model_dir,
                      quantize=None if quantize == "none" else quantize, name=name)
        laps["export"] = round(time.monotonic() - t0, 1)
    record = _record(res, options, init, mined, trained, now, seed, laps)
    manifest = read_manifest(model_dir)
    write_manifest(model_dir, manifest.replace(training=record))
    model = resolve_model(res.db, res.settings, name)  # registered: its vectors may be written
    return EmbedOutcome(model_dir=model_dir, model=model, record=record,
                        seconds=time.monotonic() - started)


def _record(res: Resources, options: EmbedOptions, init: Path, mined: EmbedMined,
            trained: EmbedTrained, now: datetime, seed: str, laps: dict[str, float]
            ) -> dict[str, Any]:
    """The manifest's training record: enough to judge the model later and to redo it."""
    return {"kind": "embedder", "base": configured_settings(res.settings, res.served).embed_model,
            "initialised_from": str(init),
            "forum": forum_name(res), "trained_at": now.isoformat(timespec="seconds"),
            "strategy": res.settings.strategy, "pairs": mined.as_dict(),
            "rules": asdict(options.rules),
            "config": {"max_length": options.max_length, "epochs": options.epochs,
                       "batch_size": options.batch_size, "lr": options.lr, "mix": options.mix,
                       "budget_s": options.budget_s, "device": options.device,
                       "held_share": options.held_share,
                       "excluded_topics": len(options.exclude)},
            # The split is drawn afresh per run and kept here (not in any public place), so the
            # guard can tell which judged topics the model never read.
            "split": {"seed": seed, "held_share": options.held_share,
                      # Every topic it never read: held out, and excluded (an evaluation's
                      # judged ones). Its zones are calibrated on these alone.
                      "held_topics": sorted(mined.held_topics | set(options.exclude))},
            "run": trained.as_dict(), "seconds": laps}

