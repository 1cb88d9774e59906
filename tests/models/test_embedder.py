"""OnnxEmbedder behaviour on the real MiniLM export and on the tiny random model."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from models import (
    DummyEmbedder,
    Embedder,
    ModelInputError,
    ModelLoadError,
    OnnxEmbedder,
    read_manifest,
    write_manifest,
)


def _copy_with(src: Path, dst: Path, **changes: object) -> Path:
    shutil.copytree(src, dst)
    write_manifest(dst, read_manifest(dst).replace(**changes))
    return dst


def test_shape_dtype_and_unit_norm(minilm: OnnxEmbedder, varied_texts: list[str]) -> None:
    vectors = minilm.embed(varied_texts)
    assert vectors.shape == (len(varied_texts), 384) == (len(varied_texts), minilm.dimensions)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert isinstance(minilm, Embedder)
    assert (minilm.name, minilm.max_length, minilm.provider) == ("all-MiniLM-L6-v2", 256, "cpu")


def test_batching_preserves_order(minilm_dir: Path, varied_texts: list[str]) -> None:
    # Small caps force several length-sorted batches, so results must be scattered back.
    embedder = OnnxEmbedder(minilm_dir, max_batch_tokens=256, max_batch_size=3)
    together = embedder.embed(varied_texts)
    alone = np.stack([embedder.embed([t])[0] for t in varied_texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_paraphrases_are_closer_than_unrelated_texts(minilm: OnnxEmbedder) -> None:
    a, b, c = minilm.embed(
        [
            "How can I change my account password?",
            "What are the steps to reset the password of my account?",
            "The volcano erupted and covered the village in ash.",
        ]
    )
    assert float(a @ b) > float(a @ c) + 0.3
    query = minilm.embed(["reset password"], kind="query")[0]
    assert float(query @ a) > float(query @ c)


def test_cls_pooling_differs_from_mean(minilm_dir: Path, tmp_path: Path) -> None:
    cls_dir = _copy_with(minilm_dir, tmp_path / "cls", pooling="cls")
    mean_model, cls_model = OnnxEmbedder(minilm_dir), OnnxEmbedder(cls_dir)
    texts = ["a short sentence", "another, rather different, sentence about cooking pasta"]
    hidden, _ = cls_model.run(cls_model.tokenize(texts))
    expected = cls_model.normalize(hidden[:, 0, :])
    np.testing.assert_allclose(cls_model.embed(texts), expected, atol=1e-6)
    assert not np.allclose(cls_model.embed(texts), mean_model.embed(texts), atol=1e-3)


def test_mean_pooling_ignores_padding(minilm: OnnxEmbedder) -> None:
    hidden = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    mask = np.array([[1, 1, 1], [1, 0, 0]], dtype=np.int64)
    pooled = minilm.pool(hidden, mask)
    np.testing.assert_allclose(pooled[0], hidden[0].mean(axis=0))
    np.testing.assert_allclose(pooled[1], hidden[1, 0])


def test_query_prefix_is_applied(tiny_embedder_dir: Path, tmp_path: Path) -> None:
    model = OnnxEmbedder(_copy_with(tiny_embedder_dir, tmp_path / "p", query_prefix="query: "))
    text = "where is the documentation"
    as_query = model.embed([text], kind="query")
    np.testing.assert_allclose(as_query, model.embed(["query: " + text]), atol=1e-6)
    assert not np.allclose(as_query, model.embed([text]), atol=1e-4)
    assert model.max_text_tokens("query") == model.max_text_tokens("passage") - 2


def test_truncate_text_matches_what_the_model_sees(minilm: OnnxEmbedder) -> None:
    long_text = "Forum posts can be very long and wander between many topics. " * 60
    cut = minilm.truncate_text(long_text)
    assert long_text.startswith(cut) and len(cut) < len(long_text)
    assert minilm.count_tokens(cut) <= minilm.max_length - 2
    np.testing.assert_allclose(minilm.embed([long_text]), minilm.embed([cut]), atol=1e-5)
    # An explicit budget above the model's limit is capped to it.
    assert minilm.truncate_text(long_text, 10_000) == cut
    assert minilm.count_tokens(minilm.truncate_text(long_text, 20)) <= 20


@pytest.mark.parametrize(
    "bad",
    [[], "a bare string", ["fine", ""], ["   "], ["ok", None], [b"bytes"], None, ("ok", 3)],
)
def test_bad_inputs_raise_model_input_error(tiny_embedder_dir: Path, bad: object) -> None:
    model = OnnxEmbedder(tiny_embedder_dir)
    with pytest.raises(ModelInputError):
        model.embed(bad)  # type: ignore[arg-type]
    with pytest.raises(ModelInputError):
        DummyEmbedder().embed(bad)  # type: ignore[arg-type]


def test_bad_kind_raises_model_input_error(tiny_embedder_dir: Path) -> None:
    with pytest.raises(ModelInputError, match="kind"):
        OnnxEmbedder(tiny_embedder_dir).embed(["text"], kind="document")  # type: ignore[arg-type]


def test_tuple_input_and_warmup(tiny_embedder_dir: Path) -> None:
    model = OnnxEmbedder(tiny_embedder_dir)
    model.warmup()
    assert model.embed(("one", "two")).shape == (2, 32)


def test_corrupted_onnx_fails_with_path(tiny_embedder_dir: Path, tmp_path: Path) -> None:
    broken = shutil.copytree(tiny_embedder_dir, tmp_path / "broken")
    onnx_file = broken / "model.onnx"
    onnx_file.write_bytes(onnx_file.read_bytes()[:1000])
    with pytest.raises(ModelLoadError, match=str(onnx_file)) as info:
        OnnxEmbedder(broken)
    assert "checksum mismatch" in str(info.value)
    # Without the checksum, ONNX Runtime itself rejects the graph, still naming the file.
    with pytest.raises(ModelLoadError, match=str(onnx_file)):
        OnnxEmbedder(broken, verify=False)


def test_missing_onnx_fails_with_path(tiny_embedder_dir: Path, tmp_path: Path) -> None:
    broken = shutil.copytree(tiny_embedder_dir, tmp_path / "missing")
    (broken / "model.onnx").unlink()
    with pytest.raises(ModelLoadError, match=str(broken / "model.onnx")):
        OnnxEmbedder(broken)


def test_loading_a_reranker_as_embedder_fails(tiny_reranker_dir: Path) -> None:
    with pytest.raises(ModelLoadError, match="task"):
        OnnxEmbedder(tiny_reranker_dir)


def test_dummy_embedder_is_deterministic_unit_vectors() -> None:
    dummy = DummyEmbedder(dimensions=16)
    assert isinstance(dummy, Embedder)
    first = dummy.embed(["alpha", "beta", "alpha"])
    assert first.shape == (3, 16) and first.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(first, axis=1), 1.0, atol=1e-6)
    np.testing.assert_array_equal(first[0], first[2])
    assert abs(float(first[0] @ first[1])) < 0.9
    np.testing.assert_array_equal(DummyEmbedder(16).embed(["alpha"], kind="query")[0], first[0])
    text = "one two  three four"
    assert dummy.truncate_text(text, 3) == "one two  three"
    assert dummy.count_tokens(text) == 4
