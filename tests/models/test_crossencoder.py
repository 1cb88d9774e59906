"""Cross-encoder scoring on tiny random BERT and XLM-RoBERTa graphs (no download)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from models import (
    ModelInputError,
    ModelManifest,
    OnnxCrossEncoder,
    Reranker,
    load_reranker,
    make_tiny_cross_encoder,
    write_manifest,
)
from models.export.native import export_encoder
from models.export.random_weights import build_random_encoder
from models.manifest import compute_checksum
from models.presets import minilm_dir

QUERY = "how do I migrate the database"
PASSAGES = [
    "Run the migration command before restarting the server.",
    "Cats sleep for most of the day.",
    "Database migrations are applied in order by version number; back up first. " * 20,
    "ok",
    "Our release notes list every schema change and the upgrade steps.",
]


def test_same_seed_same_model_and_scores(tmp_path: Path) -> None:
    first = make_tiny_cross_encoder(tmp_path / "a", seed=7)
    second = make_tiny_cross_encoder(tmp_path / "b", seed=7)
    assert first.checksum == second.checksum
    assert (tmp_path / "a" / "model.onnx").stat().st_size < 5 * 1024 * 1024
    scores_a = load_reranker(tmp_path / "a").score(QUERY, PASSAGES)
    scores_b = load_reranker(tmp_path / "b").score(QUERY, PASSAGES)
    np.testing.assert_array_equal(scores_a, scores_b)
    assert make_tiny_cross_encoder(tmp_path / "c", seed=8).checksum != first.checksum


def test_scores_shape_and_variation(tiny_reranker_dir: Path) -> None:
    reranker = load_reranker(tiny_reranker_dir)
    assert isinstance(reranker, Reranker)
    scores = reranker.score(QUERY, PASSAGES)
    assert scores.shape == (len(PASSAGES),) and scores.dtype == np.float32
    assert len({round(float(s), 6) for s in scores}) == len(PASSAGES)
    assert reranker.provider == "cpu" and reranker.name == "tiny-cross-encoder-seed0"


def test_batching_preserves_passage_order(tiny_reranker_dir: Path) -> None:
    batched = OnnxCrossEncoder(tiny_reranker_dir, max_batch_tokens=64, max_batch_size=2)
    together = batched.score(QUERY, PASSAGES)
    alone = np.array([batched.score(QUERY, [p])[0] for p in PASSAGES])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_long_inputs_are_truncated_not_rejected(tiny_reranker_dir: Path) -> None:
    reranker = load_reranker(tiny_reranker_dir)
    scores = reranker.score("query " * 500, ["passage " * 500, "short"])
    assert np.isfinite(scores).all()


@pytest.mark.parametrize(
    ("query", "passages"),
    [("", ["p"]), ("   ", ["p"]), (None, ["p"]), ("q", []), ("q", ["p", ""]), ("q", "p"),
     ("q", [1])],
)  # fmt: skip
def test_bad_inputs_raise_model_input_error(
    tiny_reranker_dir: Path, query: object, passages: object
) -> None:
    with pytest.raises(ModelInputError):
        load_reranker(tiny_reranker_dir).score(query, passages)  # type: ignore[arg-type]


def _tiny_xlmr(out: Path) -> Path:
    """A tiny XLM-RoBERTa cross-encoder (no token_type_ids input) over the MiniLM vocab."""
    config = {
        "model_type": "xlm-roberta",
        "architectures": ["XLMRobertaForSequenceClassification"],
        "vocab_size": 30522,
        "hidden_size": 32,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "intermediate_size": 64,
        "max_position_embeddings": 130,
        "type_vocab_size": 1,
        "pad_token_id": 0,  # the MiniLM tokenizer pads with id 0
        "initializer_range": 0.2,
        "num_labels": 1,
    }
    out.mkdir()
    onnx_path = export_encoder(config, build_random_encoder(config, 3), out / "m.onnx", "rerank")
    shutil.copy2(minilm_dir() / "tokenizer.json", out / "tokenizer.json")
    write_manifest(
        out,
        ModelManifest(
            name="tiny-xlmr", task="rerank", dimensions=1, pooling="none", normalize=False,
            max_length=128, version=1, checksum=compute_checksum(onnx_path), onnx_file="m.onnx",
            quantization="none", architecture="xlm-roberta",
        ),
    )  # fmt: skip
    return out


def test_xlm_roberta_graph_without_token_types(tmp_path: Path) -> None:
    reranker = OnnxCrossEncoder(_tiny_xlmr(tmp_path / "xlmr"), max_batch_size=2)
    assert not reranker.takes_token_type_ids
    together = reranker.score(QUERY, PASSAGES)
    # Padding must not shift RoBERTa positions: batched (padded) == alone (unpadded).
    alone = np.array([reranker.score(QUERY, [p])[0] for p in PASSAGES])
    np.testing.assert_allclose(together, alone, atol=1e-5)
    assert len({round(float(s), 5) for s in together}) == len(PASSAGES)
