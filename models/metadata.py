"""Model-folder metadata: tokenizer/config files and sentence-transformers settings.

Pooling, normalisation, maximum length and prompts come from the sentence-transformers files
shipped with a model when present (``modules.json``, ``1_Pooling/config.json``,
``sentence_bert_config.json``, ``config_sentence_transformers.json``), then from the presets,
then from defaults.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from models.errors import ModelError
from models.presets import Preset
from models.tokenization import TOKENIZER_FILE

METADATA_FILES = (
    TOKENIZER_FILE,
    "tokenizer_config.json",
    "special_tokens_map.json",
    "config.json",
    "modules.json",
    "sentence_bert_config.json",
    "config_sentence_transformers.json",
)
# Architectures whose position ids start at padding_idx + 1 (so max_length = positions - pad - 1).
PADDING_OFFSET_POSITIONS = ("roberta", "xlm-roberta", "camembert", "mpnet", "xlm-roberta-xl")


def copy_metadata(src: Path, dst: Path) -> None:
    """Copy tokenizer/config/sentence-transformers files that ``dst`` does not have yet."""
    names = list(METADATA_FILES)
    modules = read_json(src / "modules.json") or []
    pooling_dirs = [
        m.get("path", "") for m in modules if str(m.get("type", "")).endswith("Pooling")
    ]
    names += [f"{d}/config.json" for d in pooling_dirs or ["1_Pooling"] if d]
    for name in names:
        source, target = src / name, dst / name
        if source.is_file() and not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)


def read_json(path: Path) -> Any:
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelError(f"cannot read {path}: {exc}") from exc


def fetch_st_metadata(hub_id: str, dst: Path) -> None:
    """Best effort: sentence-transformers files of a hub model (optimum does not save them)."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        return
    for name in ("modules.json", "sentence_bert_config.json", "1_Pooling/config.json",
                 "config_sentence_transformers.json"):  # fmt: skip
        try:
            cached = hf_hub_download(hub_id, name)
        except Exception:  # absent file or offline: presets and defaults cover it
            continue
        (dst / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(cached, dst / name)


def describe_model(model_dir: Path, task: str, preset: Preset | None) -> dict[str, Any]:
    """Pooling, normalisation, max length and prefixes from model files, presets and defaults."""
    config = read_json(model_dir / "config.json") or {}
    meta: dict[str, Any] = {"architecture": str(config.get("model_type", "unknown"))}
    use_preset = preset is not None and preset.task == task
    modules = read_json(model_dir / "modules.json")
    kinds = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules or []]
    unsupported = [k for k in kinds if k not in ("Transformer", "Pooling", "Normalize")]
    if task == "embed" and unsupported:
        raise ModelError(f"sentence-transformers modules {unsupported} are not supported")
    pooling_dir = next(
        (m.get("path", "") for m in modules or [] if str(m.get("type", "")).endswith("Pooling")),
        "1_Pooling",
    )
    pooling_cfg = read_json(model_dir / pooling_dir / "config.json")
    st_cfg = read_json(model_dir / "sentence_bert_config.json") or {}
    prompts = (read_json(model_dir / "config_sentence_transformers.json") or {}).get("prompts", {})

    if task == "rerank":
        meta.update(pooling="none", normalize=False)
    else:
        if pooling_cfg:
            modes = [k for k, v in pooling_cfg.items() if k.startswith("pooling_mode") and v]
            if modes == ["pooling_mode_cls_token"]:
                meta["pooling"] = "cls"
            elif modes == ["pooling_mode_mean_tokens"]:
                meta["pooling"] = "mean"
            else:
                raise ModelError(f"unsupported sentence-transformers pooling {modes}")
        else:
            meta["pooling"] = preset.pooling if use_preset and preset else "mean"
        if modules is not None:
            meta["normalize"] = "Normalize" in kinds
        else:
            meta["normalize"] = preset.normalize if use_preset and preset else True

    max_length = st_cfg.get("max_seq_length") or (
        preset.max_length if use_preset and preset else 512
    )
    positions = config.get("max_position_embeddings")
    if positions:
        # RoBERTa-style models number positions from padding_idx + 1.
        roberta_like = meta["architecture"] in PADDING_OFFSET_POSITIONS
        offset = int(config.get("pad_token_id", 1)) + 1 if roberta_like else 0
        max_length = min(int(max_length), int(positions) - offset)
    meta["max_length"] = int(max_length)
    meta["query_prefix"] = prompts.get(
        "query", preset.query_prefix if use_preset and preset else ""
    )
    meta["passage_prefix"] = prompts.get(
        "passage", prompts.get("document", preset.passage_prefix if use_preset and preset else "")
    )
    return meta
