"""Random Hugging Face-named weights for BERT-family encoders (numpy only, for tests)."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from models.export.native import check_config


def _is_classifier(config: dict[str, Any]) -> bool:
    return any(
        str(a).endswith("ForSequenceClassification") for a in config.get("architectures", [])
    )


def build_random_encoder(config: dict[str, Any], seed: int) -> dict[str, npt.NDArray[np.float32]]:
    """Random weights, named as Hugging Face names them, for ``config`` (numpy RNG, no torch).

    With ``architectures`` ending in ``ForSequenceClassification`` the names carry the
    ``bert.``/``roberta.`` prefix and a classification head is added; otherwise they are the
    base-model names (with a pooler). LayerNorm parameters and biases are perturbed away from
    1/0 so that tests exercise every weight.
    """
    check_config(config)
    rng = np.random.default_rng(seed)
    std = float(config.get("initializer_range", 0.02))
    model_type = str(config["model_type"])
    hidden, inter = int(config["hidden_size"]), int(config["intermediate_size"])

    def normal(*shape: int, scale: float = std) -> npt.NDArray[np.float32]:
        return (rng.standard_normal(shape, dtype=np.float32) * np.float32(scale)).astype(np.float32)

    def ln() -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        return 1.0 + normal(hidden, scale=0.1), normal(hidden, scale=0.1)

    classifier = _is_classifier(config)
    prefix = ("bert." if model_type == "bert" else "roberta.") if classifier else ""
    w: dict[str, npt.NDArray[np.float32]] = {}
    pad = int(config.get("pad_token_id", 0 if model_type == "bert" else 1))
    word = normal(int(config["vocab_size"]), hidden)
    word[pad] = 0.0  # HF zero-initialises the padding embedding row
    w[prefix + "embeddings.word_embeddings.weight"] = word
    w[prefix + "embeddings.position_embeddings.weight"] = normal(
        int(config["max_position_embeddings"]), hidden
    )
    w[prefix + "embeddings.token_type_embeddings.weight"] = normal(
        int(config.get("type_vocab_size", 2)), hidden
    )
    w[prefix + "embeddings.LayerNorm.weight"], w[prefix + "embeddings.LayerNorm.bias"] = ln()
    shapes = {
        "attention.self.query": (hidden, hidden),
        "attention.self.key": (hidden, hidden),
        "attention.self.value": (hidden, hidden),
        "attention.output.dense": (hidden, hidden),
        "intermediate.dense": (inter, hidden),
        "output.dense": (hidden, inter),
    }
    for i in range(int(config["num_hidden_layers"])):
        p = f"{prefix}encoder.layer.{i}."
        for name, shape in shapes.items():
            w[p + name + ".weight"] = normal(*shape)
            w[p + name + ".bias"] = normal(shape[0])
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[p + name + ".weight"], w[p + name + ".bias"] = ln()
    num_labels = int(config.get("num_labels", len(config.get("id2label", {})) or 1))
    if not classifier or model_type == "bert":
        w[prefix + "pooler.dense.weight"] = normal(hidden, hidden)
        w[prefix + "pooler.dense.bias"] = normal(hidden)
    if classifier and model_type == "bert":
        w["classifier.weight"] = normal(num_labels, hidden)
        w["classifier.bias"] = normal(num_labels)
    elif classifier:
        w["classifier.dense.weight"] = normal(hidden, hidden)
        w["classifier.dense.bias"] = normal(hidden)
        w["classifier.out_proj.weight"] = normal(num_labels, hidden)
        w["classifier.out_proj.bias"] = normal(num_labels)
    return w
