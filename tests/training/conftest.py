"""Fixtures of the training tests: a tiny encoder checkpoint to start training from."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from models.presets import minilm_dir


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, 32-wide BERT encoder checkpoint over MiniLM's vocabulary (an init in seconds)."""
    transformers = pytest.importorskip("transformers")
    from models.tiny import tiny_bert_config

    out = tmp_path_factory.mktemp("tiny-encoder")
    config = transformers.BertConfig(**tiny_bert_config(classifier=False))
    transformers.BertModel(config).save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt",
                 "special_tokens_map.json"):
        shutil.copy2(minilm_dir() / name, out / name)
    return out
