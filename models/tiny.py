"""Tiny random-weight models for fast, download-free tests of the whole ONNX path.

They use the real all-MiniLM-L6-v2 tokenizer (vocab 30522) from the bundled package, numpy
random weights with a fixed seed, and the native exporter, so the same seed always gives a
byte-identical ONNX file (same checksum). Their outputs carry no meaning.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from models.export.native import export_encoder
from models.export.random_weights import build_random_encoder
from models.manifest import ModelManifest, compute_checksum, write_manifest
from models.presets import minilm_dir
from models.tokenization import TOKENIZER_FILE

TINY_MAX_LENGTH = 128


def tiny_bert_config(classifier: bool) -> dict[str, Any]:
    """A 2-layer, 32-wide BERT config over the MiniLM vocabulary."""
    return {
        "model_type": "bert",
        "architectures": ["BertForSequenceClassification" if classifier else "BertModel"],
        "vocab_size": 30522,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "intermediate_size": 64,
        "hidden_act": "gelu",
        "max_position_embeddings": TINY_MAX_LENGTH,
        "type_vocab_size": 2,
        "layer_norm_eps": 1e-12,
        "pad_token_id": 0,
        "initializer_range": 0.2,  # wide enough that scores clearly differ between inputs
        "num_labels": 1,
    }


def sized_bert_config(layers: int, hidden: int, heads: int, max_length: int = 512
                      ) -> dict[str, Any]:
    """A BERT encoder config of a given size over the MiniLM vocabulary (e.g. 24 x 1,024: the
    compute of bge-m3 per token, for benchmarks that cannot load the real weights)."""
    return {**tiny_bert_config(classifier=False), "hidden_size": hidden,
            "num_hidden_layers": layers, "num_attention_heads": heads,
            "intermediate_size": 4 * hidden, "max_position_embeddings": max_length,
            "initializer_range": 0.02}


def make_random_embedder(out_dir: Path, config: dict[str, Any], *, name: str, seed: int = 0,
                         max_length: int | None = None) -> ModelManifest:
    """Write an embedder of ``config`` with random weights (mean pooling, normalised) to
    ``out_dir``, exported by the native exporter, with its manifest."""
    return _make_random(Path(out_dir), config, name=name, seed=seed, task="embed",
                        max_length=max_length or int(config["max_position_embeddings"]))


def _make_tiny(out_dir: Path, seed: int, task: str) -> ModelManifest:
    kind = "cross-encoder" if task == "rerank" else "embedder"
    return _make_random(Path(out_dir), tiny_bert_config(classifier=task == "rerank"),
                        name=f"tiny-{kind}-seed{seed}", seed=seed, task=task,
                        max_length=TINY_MAX_LENGTH)


def _make_random(out: Path, config: dict[str, Any], *, name: str, seed: int, task: str,
                 max_length: int) -> ModelManifest:
    out.mkdir(parents=True, exist_ok=True)
    onnx_path = export_encoder(config, build_random_encoder(config, seed), out / "model.onnx", task)
    shutil.copy2(minilm_dir() / TOKENIZER_FILE, out / TOKENIZER_FILE)
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    kind = "cross-encoder" if task == "rerank" else "embedder"
    manifest = ModelManifest(
        name=name,
        task="rerank" if task == "rerank" else "embed",
        dimensions=1 if task == "rerank" else int(config["hidden_size"]),
        pooling="none" if task == "rerank" else "mean",
        normalize=task == "embed",
        max_length=max_length,
        version=1,
        checksum=compute_checksum(onnx_path),
        onnx_file=onnx_path.name,
        quantization="none",
        architecture="bert",
        source=f"random-{kind}:seed={seed}",
    )
    write_manifest(out, manifest)
    return manifest


def make_tiny_cross_encoder(out_dir: Path, seed: int = 0) -> ModelManifest:
    """Write a tiny BERT cross-encoder (1 logit, random weights) to ``out_dir``; ~4 MB, < 1 s."""
    return _make_tiny(out_dir, seed, "rerank")


def make_tiny_embedder(out_dir: Path, seed: int = 0) -> ModelManifest:
    """Write a tiny BERT embedder (32 dims, mean pooling, normalised) to ``out_dir``."""
    return _make_tiny(out_dir, seed, "embed")
