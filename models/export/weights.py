"""Reading Hugging Face checkpoints (``config.json`` + safetensors) with numpy only."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import safetensors.numpy

from models.errors import ModelError

Weights = dict[str, npt.NDArray[np.float32]]

SAFETENSORS_FILE = "model.safetensors"
SAFETENSORS_INDEX = "model.safetensors.index.json"


def load_config(model_dir: str | Path) -> dict[str, Any]:
    """Read ``config.json`` of a Hugging Face model directory."""
    path = Path(model_dir) / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelError(f"cannot read {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise ModelError(f"{path} is not a JSON object")
    return data


def safetensors_files(model_dir: str | Path) -> list[Path]:
    """The safetensors shard(s) of a model directory, or an empty list when there are none."""
    directory = Path(model_dir)
    single = directory / SAFETENSORS_FILE
    if single.is_file():
        return [single]
    index = directory / SAFETENSORS_INDEX
    if index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8")).get("weight_map", {})
        return [directory / name for name in sorted(set(weight_map.values()))]
    return []


def _read_bfloat16_file(path: Path) -> dict[str, npt.NDArray[Any]]:
    """Fallback reader for files numpy's safetensors binding rejects (bfloat16 tensors).

    The safetensors layout is an 8-byte little-endian header size, a JSON header giving dtype,
    shape and byte offsets, then the raw little-endian data.
    """
    dtypes: dict[str, Any] = {
        "F64": np.float64, "F32": np.float32, "F16": np.float16, "BF16": "bf16",
        "I64": np.int64, "I32": np.int32, "I16": np.int16, "I8": np.int8, "U8": np.uint8,
        "BOOL": np.bool_,
    }  # fmt: skip
    with path.open("rb") as fh:
        (header_len,) = struct.unpack("<Q", fh.read(8))
        header = json.loads(fh.read(header_len))
    data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
    tensors: dict[str, npt.NDArray[Any]] = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, stop = info["data_offsets"]
        raw = data[start:stop]
        kind = dtypes.get(info["dtype"])
        if kind is None:
            raise ModelError(f"{path}: unsupported dtype {info['dtype']} for {name}")
        if kind == "bf16":
            # bfloat16 is the upper half of a float32: widen by shifting into the high 16 bits.
            array = (raw.view("<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            array = raw.view(np.dtype(kind).newbyteorder("<"))
        tensors[name] = np.asarray(array).reshape(info["shape"])
    return tensors


def load_weights(model_dir: str | Path) -> dict[str, npt.NDArray[Any]]:
    """Load every tensor of a model directory's safetensors checkpoint as numpy arrays.

    Floating tensors are widened to float32 (the exported graph is float32; fp16/bf16
    checkpoints are common on the hub).
    """
    files = safetensors_files(model_dir)
    if not files:
        raise ModelError(f"no model.safetensors (or sharded index) in {model_dir}")
    tensors: dict[str, npt.NDArray[Any]] = {}
    for path in files:
        try:
            part = safetensors.numpy.load_file(str(path))
        except TypeError:
            part = _read_bfloat16_file(path)
        except Exception as exc:
            raise ModelError(f"cannot read {path}: {exc}") from exc
        tensors.update(part)
    return {name: (t.astype(np.float32) if _is_float(t) else t) for name, t in tensors.items()}


def _is_float(array: npt.NDArray[Any]) -> bool:
    # ml_dtypes (pulled in by onnx) registers "bfloat16", which numpy does not call floating.
    return array.dtype.kind == "f" or array.dtype.name == "bfloat16"
