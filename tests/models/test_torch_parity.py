"""Parity of the torch-free exporter with PyTorch / sentence-transformers (``export`` extra)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from models import OnnxEmbedder
from models.export.native import export_native
from models.export.random_weights import build_random_encoder
from models.presets import minilm_dir
from models.tiny import tiny_bert_config

pytestmark = [
    pytest.mark.torch,
    # optimum drives torch's legacy TorchScript exporter: its deprecation chatter is not ours.
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::torch.jit.TracerWarning"),
]
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _ort_run(path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    return np.asarray(session.run(None, {n: feeds[n] for n in names})[0])


def _random_batch(vocab: int, pad: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    ids = rng.integers(pad + 5, vocab, size=(4, 23)).astype(np.int64)
    mask = np.ones_like(ids)
    for row, length in enumerate([23, 17, 9, 3]):
        ids[row, length:] = pad
        mask[row, length:] = 0
    types = np.zeros_like(ids)
    types[:, 5:] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


def _torch_forward(model: Any, feeds: dict[str, np.ndarray], token_types: bool) -> np.ndarray:
    kwargs = {k: torch.from_numpy(v) for k, v in feeds.items()}
    if not token_types:
        del kwargs["token_type_ids"]
    with torch.no_grad():
        out = model(**kwargs)
    tensor = out.logits if hasattr(out, "logits") else out.last_hidden_state
    return np.asarray(tensor.numpy())


def test_minilm_matches_sentence_transformers(
    minilm: OnnxEmbedder, varied_texts: list[str]
) -> None:
    st = pytest.importorskip("sentence_transformers")
    reference = st.SentenceTransformer(str(minilm_dir()), device="cpu")
    reference.max_seq_length = minilm.max_length
    expected = reference.encode(varied_texts, normalize_embeddings=True, batch_size=8)
    ours = minilm.embed(varied_texts)
    cosines = np.sum(expected * ours, axis=1)
    print(f"MiniLM vs sentence-transformers: mean cos {cosines.mean():.7f}, "
          f"min {cosines.min():.7f}, max |diff| {np.abs(expected - ours).max():.2e}")  # fmt: skip
    assert float(cosines.mean()) >= 0.9999
    assert float(cosines.min()) >= 0.999


CLASSIFIERS: dict[str, dict[str, Any]] = {
    "bert": dict(
        cls="BertForSequenceClassification", vocab_size=1000, hidden_size=64,
        num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=64, pad_token_id=0,
    ),
    "xlm-roberta": dict(
        cls="XLMRobertaForSequenceClassification", vocab_size=1000, hidden_size=64,
        num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
        max_position_embeddings=66, type_vocab_size=1, pad_token_id=1,
    ),
}  # fmt: skip


@pytest.mark.parametrize("num_labels", [1, 3])
@pytest.mark.parametrize("model_type", sorted(CLASSIFIERS))
def test_random_classifier_logits_match_pytorch(
    tmp_path: Path, model_type: str, num_labels: int
) -> None:
    spec = dict(CLASSIFIERS[model_type])
    model_cls = getattr(transformers, spec.pop("cls"))
    config = transformers.AutoConfig.for_model(model_type, num_labels=num_labels, **spec)
    torch.manual_seed(0)
    model = model_cls(config).eval()
    model.save_pretrained(tmp_path / "hf", safe_serialization=True)
    path = export_native(tmp_path / "hf", tmp_path / "model.onnx", task="rerank")
    feeds = _random_batch(config.vocab_size, config.pad_token_id)
    expected = _torch_forward(model, feeds, token_types=model_type == "bert")
    ours = _ort_run(path, feeds)
    assert ours.shape == expected.shape == (4, num_labels)
    diff = float(np.abs(ours - expected).max())
    print(f"{model_type} num_labels={num_labels}: max |logit diff| {diff:.2e}")
    np.testing.assert_allclose(ours, expected, atol=1e-4, rtol=0)


@pytest.mark.parametrize(
    ("model_type", "classifier", "hidden_act"),
    [("bert", False, "gelu_new"), ("bert", True, "gelu"), ("xlm-roberta", True, "gelu"),
     ("xlm-roberta", False, "gelu")],
)  # fmt: skip
def test_numpy_random_weights_load_in_pytorch(
    tmp_path: Path, model_type: str, classifier: bool, hidden_act: str
) -> None:
    import safetensors.numpy

    config = {**tiny_bert_config(classifier), "hidden_act": hidden_act, "model_type": model_type}
    config["max_position_embeddings"] = 66
    if model_type != "bert":
        config.update(type_vocab_size=1, pad_token_id=1)
        config["architectures"] = [
            "XLMRobertaForSequenceClassification" if classifier else "XLMRobertaModel"
        ]
    src = tmp_path / "ckpt"
    src.mkdir()
    (src / "config.json").write_text(json.dumps(config))
    safetensors.numpy.save_file(build_random_encoder(config, 9), str(src / "model.safetensors"))
    auto = transformers.AutoModelForSequenceClassification if classifier else transformers.AutoModel
    model, info = auto.from_pretrained(str(src), output_loading_info=True)
    model.eval()
    # Every numpy weight must land in the torch model under its Hugging Face name.
    assert not info["missing_keys"] and not info["unexpected_keys"], info
    assert not info["mismatched_keys"], info
    task = "rerank" if classifier else "embed"
    path = export_native(src, tmp_path / "model.onnx", task=task)
    feeds = _random_batch(config["vocab_size"], config["pad_token_id"], seed=1)
    expected = _torch_forward(model, feeds, token_types=model_type == "bert")
    ours = _ort_run(path, feeds)
    if task == "embed":
        mask = feeds["attention_mask"][..., None].astype(bool)
        expected, ours = np.where(mask, expected, 0), np.where(mask, ours, 0)
    np.testing.assert_allclose(ours, expected, atol=1e-4, rtol=0)


def test_optimum_export_agrees_with_native(
    tmp_path: Path, minilm: OnnxEmbedder, varied_texts: list[str]
) -> None:
    """Route (c) of prepare_model, on a local folder so that nothing is downloaded."""
    pytest.importorskip("optimum.exporters.onnx")
    from models.export.optimum_export import export_with_optimum

    path = export_with_optimum(str(minilm_dir()), "embed", tmp_path / "optimum")
    tokenizer = minilm.tokenizer
    ids = tokenizer.encode_batch(varied_texts[:6])
    padded = minilm.pad(ids)
    feeds = {
        "input_ids": padded.input_ids,
        "attention_mask": padded.attention_mask,
        "token_type_ids": padded.token_type_ids,
    }
    reference = minilm.normalize(minilm.pool(_ort_run(path, feeds), padded.attention_mask))
    np.testing.assert_allclose(minilm.embed(varied_texts[:6]), reference, atol=1e-5)


def test_prepare_routes_other_architectures_through_optimum(tmp_path: Path) -> None:
    pytest.importorskip("optimum.exporters.onnx")
    import shutil

    from models import prepare_model

    config = transformers.DistilBertConfig(
        vocab_size=30522, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=128
    )
    torch.manual_seed(0)
    src = tmp_path / "distilbert"
    transformers.DistilBertModel(config).save_pretrained(src, safe_serialization=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt"):
        shutil.copy2(minilm_dir() / name, src / name)
    manifest = prepare_model(str(src), "embed", tmp_path / "out")
    assert manifest.architecture == "distilbert"
    assert (manifest.dimensions, manifest.max_length) == (32, 128)
    embedder = OnnxEmbedder(tmp_path / "out")
    assert not embedder.takes_token_type_ids
    texts = ["a first text", "and a second, longer, text"]
    alone = np.stack([embedder.embed([t])[0] for t in texts])
    batched = embedder.embed(texts)
    np.testing.assert_allclose(batched, alone, atol=1e-5)
