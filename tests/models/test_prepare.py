"""prepare_model: source resolution, metadata, idempotence, int8."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest
import safetensors.numpy

from models import (
    ModelError,
    OnnxCrossEncoder,
    OnnxEmbedder,
    make_tiny_embedder,
    prepare_model,
    read_manifest,
)
from models.export.native import export_encoder
from models.export.random_weights import build_random_encoder
from models.manifest import compute_checksum
from models.presets import find_preset, minilm_dir
from models.tiny import tiny_bert_config


def _linked_minilm(dst: Path) -> Path:
    """A writable copy of the bundled MiniLM folder (the big weights file is symlinked)."""
    src = minilm_dir()
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("model.safetensors", "*.md"))
    (dst / "model.safetensors").symlink_to(src / "model.safetensors")
    return dst


def test_minilm_manifest_from_bundled_package(minilm_dir: Path) -> None:
    manifest = read_manifest(minilm_dir)
    assert (manifest.name, manifest.task, manifest.dimensions) == ("all-MiniLM-L6-v2", "embed", 384)
    assert (manifest.pooling, manifest.max_length, manifest.normalize) == ("mean", 256, True)
    assert manifest.source == "sentence-transformers/all-MiniLM-L6-v2"
    assert manifest.architecture == "bert" and manifest.quantization == "none"
    assert manifest.checksum == compute_checksum(minilm_dir / manifest.onnx_file)


def test_prepare_is_idempotent(minilm_dir: Path) -> None:
    onnx_file = minilm_dir / "model.onnx"
    before = onnx_file.stat().st_mtime_ns
    again = prepare_model("all-minilm-l6-v2", "embed", minilm_dir)
    assert again == read_manifest(minilm_dir)
    assert onnx_file.stat().st_mtime_ns == before


def test_tampered_model_is_re_exported(tmp_path: Path) -> None:
    first = make_tiny_embedder(tmp_path / "src", seed=1)
    out = tmp_path / "out"
    src = tmp_path / "ckpt"
    config = tiny_bert_config(classifier=False)
    src.mkdir()
    (src / "config.json").write_text(json.dumps(config))
    safetensors.numpy.save_file(build_random_encoder(config, 1), str(src / "model.safetensors"))
    shutil.copy2(tmp_path / "src" / "tokenizer.json", src / "tokenizer.json")
    manifest = prepare_model(str(src), "embed", out)
    assert manifest.checksum == first.checksum  # same weights, same bytes as make_tiny_embedder
    (out / "model.onnx").write_bytes(b"garbage")
    assert prepare_model(str(src), "embed", out).checksum == first.checksum
    assert compute_checksum(out / "model.onnx") == first.checksum


def test_sentence_transformers_files_drive_the_manifest(tmp_path: Path) -> None:
    src = _linked_minilm(tmp_path / "st")
    (src / "1_Pooling" / "config.json").write_text(
        json.dumps({"pooling_mode_cls_token": True, "pooling_mode_mean_tokens": False})
    )
    (src / "sentence_bert_config.json").write_text(json.dumps({"max_seq_length": 128}))
    modules = json.loads((src / "modules.json").read_text())
    (src / "modules.json").write_text(
        json.dumps([m for m in modules if "Normalize" not in m["type"]])
    )
    (src / "config_sentence_transformers.json").write_text(
        json.dumps({"prompts": {"query": "query: ", "document": "passage: "}})
    )
    manifest = prepare_model(str(src), "embed", tmp_path / "out", name="custom")
    assert (manifest.pooling, manifest.max_length, manifest.normalize) == ("cls", 128, False)
    assert (manifest.query_prefix, manifest.passage_prefix) == ("query: ", "passage: ")
    assert manifest.name == "custom" and manifest.source == str(src.resolve())
    embedder = OnnxEmbedder(tmp_path / "out")
    vector = embedder.embed(["not normalised"])[0]
    assert abs(float(np.linalg.norm(vector)) - 1.0) > 1e-3


def test_existing_onnx_folder_is_copied(tmp_path: Path) -> None:
    tiny = tmp_path / "tiny"
    make_tiny_embedder(tiny, seed=2)
    src = tmp_path / "hub-style"
    (src / "onnx").mkdir(parents=True)
    config = tiny_bert_config(classifier=False)
    export_encoder(
        config, build_random_encoder(config, 2), src / "onnx" / "model.onnx", external_data=True
    )
    for name in ("tokenizer.json", "config.json"):
        shutil.copy2(tiny / name, src / name)
    manifest = prepare_model(str(src), "embed", tmp_path / "out")
    out = tmp_path / "out"
    assert (out / "model.onnx_data").is_file() and manifest.dimensions == 32
    assert manifest.checksum == compute_checksum(src / "onnx" / "model.onnx")
    np.testing.assert_allclose(
        OnnxEmbedder(out).embed(["same graph"]), OnnxEmbedder(tiny).embed(["same graph"]), atol=1e-6
    )


def test_local_cross_encoder_checkpoint(tmp_path: Path) -> None:
    config = tiny_bert_config(classifier=True)
    src = tmp_path / "ce"
    src.mkdir()
    (src / "config.json").write_text(json.dumps(config))
    safetensors.numpy.save_file(build_random_encoder(config, 0), str(src / "model.safetensors"))
    shutil.copy2(minilm_dir() / "tokenizer.json", src / "tokenizer.json")
    manifest = prepare_model(str(src), "rerank", tmp_path / "out")
    assert (manifest.task, manifest.dimensions, manifest.pooling) == ("rerank", 1, "none")
    assert manifest.max_length == config["max_position_embeddings"]
    scores = OnnxCrossEncoder(tmp_path / "out").score("q", ["a", "b"])
    assert scores.shape == (2,)


def test_missing_export_extra_gives_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "optimum.exporters.onnx", None)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    with pytest.raises(ModelError, match=r"pip install '\.\[export\]'"):
        prepare_model(str(tmp_path / "src"), "embed", tmp_path / "out")
    assert not (tmp_path / "out" / "manifest.json").exists()


@pytest.mark.parametrize(("task", "quantize"), [("classify", None), ("embed", "fp16")])
def test_invalid_arguments(tmp_path: Path, task: str, quantize: str | None) -> None:
    with pytest.raises(ModelError):
        prepare_model("all-MiniLM-L6-v2", task, tmp_path, quantize=quantize)


def test_presets() -> None:
    for name in ("BAAI/bge-m3", "bge-m3", "baai/BGE-M3"):
        preset = find_preset(name)
        assert preset is not None
        assert (preset.pooling, preset.max_length, preset.dimensions) == ("cls", 8192, 1024)
    mmarco = find_preset("cross-encoder/mmarco-mMiniLMv2-L12-H384-v1")
    assert mmarco is not None and (mmarco.task, mmarco.max_length) == ("rerank", 512)
    assert find_preset("sentence-transformers/all-MiniLM-L6-v2") == find_preset("all-minilm-l6-v2")
    assert find_preset("unknown/model") is None


def test_int8_keeps_embeddings_close(
    tmp_path: Path, minilm: OnnxEmbedder, varied_texts: list[str]
) -> None:
    manifest = prepare_model("all-MiniLM-L6-v2", "embed", tmp_path / "int8", quantize="int8")
    assert (manifest.quantization, manifest.onnx_file) == ("int8", "model_int8.onnx")
    assert not (tmp_path / "int8" / "model.onnx").exists()
    size = (tmp_path / "int8" / "model_int8.onnx").stat().st_size
    assert size < 0.5 * (minilm.model_dir / "model.onnx").stat().st_size
    int8 = OnnxEmbedder(tmp_path / "int8")
    cosines = np.sum(int8.embed(varied_texts) * minilm.embed(varied_texts), axis=1)
    assert float(cosines.mean()) >= 0.98, cosines


def test_a_folder_holding_other_files_is_never_prepared_into(tmp_path: Path) -> None:
    """Fault (issue 45): a folder with no reusable model was written into, so its files, or a
    link planted in it, mixed into the new model."""
    src = tmp_path / "tiny"
    make_tiny_embedder(src, seed=3)
    out = tmp_path / "out"
    out.mkdir()
    (out / "tokenizer_config.json").write_text('{"planted": true}')
    (out / "special_tokens_map.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(ModelError, match="never into one that holds other files"):
        prepare_model(str(src), "embed", out)
    assert sorted(p.name for p in out.iterdir()) == ["special_tokens_map.json",
                                                     "tokenizer_config.json"]
    assert not (tmp_path / "elsewhere.json").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]  # no leftovers
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "tiny", target_is_directory=True)
    with pytest.raises(ModelError, match="a link or a file"):
        prepare_model(str(src), "embed", link)


def test_an_older_model_is_replaced_whole(tmp_path: Path) -> None:
    src = tmp_path / "tiny"
    make_tiny_embedder(src, seed=4)
    out = tmp_path / "out"
    prepare_model(str(src), "embed", out)
    (out / "planted.txt").write_text("left by someone")
    manifest = prepare_model(str(src), "embed", out, quantize="int8")  # not reusable: redone
    assert manifest.quantization == "int8"
    assert not (out / "planted.txt").exists() and not (out / "model.onnx").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out", "tiny"]
    empty = tmp_path / "claimed"
    empty.mkdir()  # an empty folder (`export_reranker` claims its name so) takes the model
    assert prepare_model(str(src), "embed", empty).dimensions == manifest.dimensions
