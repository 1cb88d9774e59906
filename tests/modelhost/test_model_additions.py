"""What the host needs from the models package: pair scoring, raw vectors, token spans, light
imports."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from models import ModelInputError, OnnxCrossEncoder, OnnxEmbedder


def test_score_pairs_equals_scoring_each_query(tiny_reranker: OnnxCrossEncoder) -> None:
    pairs = [("disk failure", "replace the disk"), ("backup", "restic snapshots nightly"),
             ("disk failure", "cats sleep"), ("backup", "x " * 400)]  # fmt: skip
    scores = tiny_reranker.score_pairs(pairs)
    disk = tiny_reranker.score("disk failure", ["replace the disk", "cats sleep"])
    backup = tiny_reranker.score("backup", ["restic snapshots nightly", "x " * 400])
    np.testing.assert_allclose(scores, [disk[0], backup[0], disk[1], backup[1]], atol=1e-6)
    for bad in ([], [("", "text")], [("q", " ")], [("q",)]):
        with pytest.raises(ModelInputError):
            tiny_reranker.score_pairs(bad)  # type: ignore[arg-type]


def test_embed_can_return_raw_vectors(minilm: OnnxEmbedder) -> None:
    texts = ["a ZFS scrub found errors", "Proxmox backup server"]
    raw = minilm.embed(texts, normalize=False)
    assert not np.allclose(np.linalg.norm(raw, axis=1), 1.0, atol=1e-3)
    np.testing.assert_allclose(minilm.normalize(raw), minilm.embed(texts), atol=1e-6)


def test_describe_gives_ids_and_character_spans(minilm: OnnxEmbedder) -> None:
    text = "Ça coûte 5 € — déjà vu"
    tokens = minilm.tokenizer.describe(text)
    assert tokens[0].special and tokens[-1].special and tokens[0].start is None
    body = tokens[1:-1]
    assert [t.id for t in body] == minilm.tokenizer.encode_batch([text])[0][1:-1]
    for token in body:
        assert token.start is not None and text[token.start:token.stop] == token.text
    assert len(minilm.tokenizer.describe(text, add_special_tokens=False)) == len(body)


def test_reading_manifests_does_not_load_onnx_runtime() -> None:
    # `sidecar model-host` checks model folders in gunicorn's master, which must not load ONNX
    # Runtime or numpy: their threads do not survive the fork into the workers.
    code = ("import sys, models.manifest, models.errors, sidecar.cli.modelhost; "
            "print(sorted(m for m in ('onnxruntime', 'numpy', 'tokenizers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    code = "import models; print(models.OnnxEmbedder.__name__, models.load_embedder.__name__)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["OnnxEmbedder", "load_embedder"]
