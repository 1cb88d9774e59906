"""The torch-free exporter: graph contract, weight loading variants, external data."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import safetensors.numpy

from models import ModelError
from models.export.native import OPSET, export_encoder, export_native, is_supported
from models.export.random_weights import build_random_encoder
from models.export.weights import _read_bfloat16_file, load_weights
from models.manifest import compute_checksum, external_data_files
from models.tiny import tiny_bert_config


def _run(path: Path, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
    names = [i.name for i in session.get_inputs()]
    return np.asarray(session.run(None, {n: feeds[n] for n in names})[0])


def _batch(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(1000, 30000, size=(3, 12)).astype(np.int64)
    mask = np.ones_like(ids)
    mask[1, 7:] = 0
    ids[1, 7:] = 0
    return ids, mask


def test_graph_contract(tmp_path: Path) -> None:
    config = tiny_bert_config(classifier=False)
    path = export_encoder(config, build_random_encoder(config, 0), tmp_path / "e.onnx", "embed")
    model = onnx.load(str(path))
    assert model.opset_import[0].version == OPSET
    assert [i.name for i in model.graph.input] == ["input_ids", "attention_mask", "token_type_ids"]
    assert [o.name for o in model.graph.output] == ["last_hidden_state"]
    dims = [d.dim_param or d.dim_value for d in model.graph.output[0].type.tensor_type.shape.dim]
    assert dims == ["batch", "sequence", 32]
    ids, mask = _batch()
    assert _run(path, ids, mask).shape == (3, 12, 32)
    assert _run(path, ids[:1, :5], mask[:1, :5]).shape == (1, 5, 32)


def test_padding_does_not_change_real_tokens(tmp_path: Path) -> None:
    for model_type in ("bert", "xlm-roberta"):
        config = {**tiny_bert_config(classifier=False), "model_type": model_type}
        path = export_encoder(
            config, build_random_encoder(config, 1), tmp_path / f"{model_type}.onnx"
        )
        ids, mask = _batch()
        padded = _run(path, ids, mask)[1, :7]
        alone = _run(path, ids[1:2, :7], mask[1:2, :7])[0]
        np.testing.assert_allclose(padded, alone, atol=1e-5)


def test_export_is_deterministic(tmp_path: Path) -> None:
    config = tiny_bert_config(classifier=True)
    a = export_encoder(config, build_random_encoder(config, 5), tmp_path / "a.onnx", "rerank")
    b = export_encoder(config, build_random_encoder(config, 5), tmp_path / "b.onnx", "rerank")
    assert a.read_bytes() == b.read_bytes()


def test_external_data_round_trip(tmp_path: Path) -> None:
    config = tiny_bert_config(classifier=False)
    weights = build_random_encoder(config, 2)
    inline = export_encoder(config, weights, tmp_path / "inline.onnx")
    external = export_encoder(config, weights, tmp_path / "ext" / "model.onnx", external_data=True)
    assert external_data_files(external) == [external.parent / "model.onnx_data"]
    assert external.stat().st_size < 100_000
    ids, mask = _batch()
    np.testing.assert_array_equal(_run(inline, ids, mask), _run(external, ids, mask))
    # The checksum covers the side file too.
    before = compute_checksum(external)
    data = external.parent / "model.onnx_data"
    raw = bytearray(data.read_bytes())
    raw[-1] ^= 0xFF
    data.write_bytes(bytes(raw))
    assert compute_checksum(external) != before


def _save_checkpoint(directory: Path, config: dict[str, Any], weights: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    safetensors.numpy.save_file(weights, str(directory / "model.safetensors"))
    return directory


def test_prefixed_and_unprefixed_names_give_the_same_graph(tmp_path: Path) -> None:
    config = tiny_bert_config(classifier=False)
    weights = build_random_encoder(config, 3)
    plain = _save_checkpoint(tmp_path / "plain", config, weights)
    prefixed = _save_checkpoint(
        tmp_path / "prefixed",
        {**config, "architectures": ["BertForMaskedLM"]},
        {"bert." + k: v for k, v in weights.items()},
    )
    assert is_supported(plain) and is_supported(prefixed)
    ids, mask = _batch()
    a = _run(export_native(plain, tmp_path / "a.onnx"), ids, mask)
    b = _run(export_native(prefixed, tmp_path / "b.onnx"), ids, mask)
    np.testing.assert_array_equal(a, b)


def _write_bf16(path: Path, tensors: dict[str, np.ndarray]) -> None:
    """A safetensors file with bfloat16 tensors (truncated float32), written by hand."""
    header: dict[str, Any] = {}
    blobs = []
    offset = 0
    for name, array in tensors.items():
        raw = (array.astype(np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
        header[name] = {"dtype": "BF16", "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}  # fmt: skip
        blobs.append(raw)
        offset += len(raw)
    encoded = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"".join(blobs))


def test_bfloat16_checkpoints_are_widened(tmp_path: Path) -> None:
    config = tiny_bert_config(classifier=False)
    weights = build_random_encoder(config, 4)
    (tmp_path / "config.json").write_text(json.dumps(config))
    _write_bf16(tmp_path / "model.safetensors", weights)
    loaded = load_weights(tmp_path)
    name = "encoder.layer.0.intermediate.dense.weight"
    assert loaded[name].dtype == np.float32
    np.testing.assert_allclose(loaded[name], weights[name], rtol=1e-2, atol=1e-6)
    # The hand-written reader (used when numpy has no bfloat16 dtype) agrees bit for bit.
    fallback = _read_bfloat16_file(tmp_path / "model.safetensors")[name]
    np.testing.assert_array_equal(fallback, loaded[name])
    ids, mask = _batch()
    assert np.isfinite(_run(export_native(tmp_path, tmp_path / "m.onnx"), ids, mask)).all()


def test_unsupported_architecture_and_missing_head(tmp_path: Path) -> None:
    config = tiny_bert_config(classifier=False)
    with pytest.raises(ModelError, match="export"):
        export_encoder({**config, "model_type": "gpt2"}, {}, tmp_path / "x.onnx")
    with pytest.raises(ModelError, match="classifier"):
        export_encoder(config, build_random_encoder(config, 0), tmp_path / "y.onnx", "rerank")
    weights = build_random_encoder(config, 0)
    del weights["encoder.layer.1.output.dense.weight"]
    with pytest.raises(ModelError, match=r"encoder\.layer\.1\.output\.dense\.weight"):
        export_encoder(config, weights, tmp_path / "z.onnx")
    assert not is_supported(tmp_path)
