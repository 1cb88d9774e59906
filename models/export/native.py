"""Torch-free ONNX exporter for BERT-family encoders (BERT, RoBERTa, XLM-RoBERTa).

The graph is written op by op with ``onnx.helper`` from ``config.json`` + safetensors weights, so
the default install can turn the demo model into ONNX without PyTorch. It mirrors Hugging Face's
``BertModel`` / ``XLMRobertaModel`` (absolute positions, post-LayerNorm encoder) and their
sequence-classification heads.

Graph contract (opset 17, dynamic ``batch`` and ``sequence`` axes):

* inputs ``input_ids`` and ``attention_mask`` (int64), plus ``token_type_ids`` for BERT;
* output ``last_hidden_state`` (float32 ``[batch, sequence, hidden]``) for task ``embed``, or
  ``logits`` (float32 ``[batch, num_labels]``) for task ``rerank``.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper

from models.errors import ModelError
from models.export.graph import Array, GraphBuilder, attach_initializers
from models.export.weights import load_config, load_weights, safetensors_files

OPSET = 17
# IR 8 is the oldest that carries opset 17; keeping it low lets older onnxruntime builds load us.
IR_VERSION = 8
SUPPORTED_MODEL_TYPES = ("bert", "roberta", "xlm-roberta")
# Protobuf cannot serialise a message over 2 GiB; above this the weights go to a side file.
EXTERNAL_DATA_THRESHOLD = 1_800_000_000
# Additive attention bias for padded keys. -10000 (the original BERT value) rather than
# float32-min so the graph also behaves under fp16 execution (OpenVINO GPU); exp(-1e4) is 0.
MASK_BIAS = -10000.0

_PREFIXES = {"bert": ("bert.", ""), "roberta": ("roberta.", ""), "xlm-roberta": ("roberta.", "")}


def is_supported(model_dir: str | Path) -> bool:
    """True when ``model_dir`` has a safetensors checkpoint of an architecture we export."""
    directory = Path(model_dir)
    if not (directory / "config.json").is_file() or not safetensors_files(directory):
        return False
    try:
        config = load_config(directory)
    except ModelError:
        return False
    return config.get("model_type") in SUPPORTED_MODEL_TYPES and not config.get("is_decoder")


class _Checkpoint:
    """Name resolution over a checkpoint: optional ``bert.``/``roberta.`` prefix, LN aliases."""

    def __init__(self, weights: dict[str, Array], model_type: str) -> None:
        self.weights = weights
        prefix = next(
            (
                p
                for p in _PREFIXES[model_type]
                if f"{p}embeddings.word_embeddings.weight" in weights
            ),
            None,
        )
        if prefix is None:
            raise ModelError(
                "checkpoint has no embeddings.word_embeddings.weight "
                f"(with prefix {' or '.join(repr(p) for p in _PREFIXES[model_type] if p)} or none)"
            )
        self.prefix: str = prefix

    def has(self, name: str, encoder: bool = True) -> bool:
        return ((self.prefix if encoder else "") + name) in self.weights

    def get(self, name: str, encoder: bool = True) -> npt.NDArray[np.float32]:
        full = (self.prefix if encoder else "") + name
        candidates = [full]
        # Old TF-converted checkpoints name LayerNorm parameters gamma/beta.
        if full.endswith("LayerNorm.weight"):
            candidates.append(full[: -len("weight")] + "gamma")
        if full.endswith("LayerNorm.bias"):
            candidates.append(full[: -len("bias")] + "beta")
        for candidate in candidates:
            if candidate in self.weights:
                return np.ascontiguousarray(self.weights[candidate], dtype=np.float32)
        raise ModelError(f"checkpoint is missing weight {full!r}")


def check_config(config: dict[str, Any]) -> None:
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ModelError(
            f"native exporter supports model_type {SUPPORTED_MODEL_TYPES}, got {model_type!r}; "
            "use the optimum exporter (pip install '.[export]')"
        )
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise ModelError("only absolute position embeddings are supported")
    if config.get("is_decoder") or config.get("add_cross_attention"):
        raise ModelError("decoder models are not supported")
    if config["hidden_size"] % config["num_attention_heads"]:
        raise ModelError("hidden_size must be a multiple of num_attention_heads")


def _embeddings(g: GraphBuilder, ck: _Checkpoint, config: dict[str, Any], is_bert: bool) -> str:
    word = g.op(
        "Gather",
        [g.const("embeddings.word", ck.get("embeddings.word_embeddings.weight")), "input_ids"],
    )
    positions = ck.get("embeddings.position_embeddings.weight")
    token_types = ck.get("embeddings.token_type_embeddings.weight")
    if is_bert:
        # Absolute positions 0..S-1: slice the table to the sequence length.
        seq_len = g.op("Shape", ["input_ids"], start=1, end=2)
        pos = g.op(
            "Slice",
            [g.const("embeddings.position", positions), g.const("zero_1d", [0]), seq_len,
             g.const("zero_1d", [0])],
        )  # fmt: skip
        types = g.op("Gather", [g.const("embeddings.token_type", token_types), "token_type_ids"])
        summed = g.op("Add", [g.op("Add", [word, types]), pos])
    else:
        # HF create_position_ids_from_input_ids: positions count non-pad tokens from
        # padding_idx + 1, and pad tokens sit at padding_idx.
        pad = int(config.get("pad_token_id", 1))
        not_pad = g.op(
            "Cast",
            [g.op("Not", [g.op("Equal", ["input_ids", g.const("pad_id", np.int64(pad))])])],
            to=TensorProto.INT64,
        )
        counted = g.op("CumSum", [not_pad, g.const("axis_1", np.int64(1))])
        pos_ids = g.op("Add", [g.op("Mul", [counted, not_pad]), g.const("pad_id", np.int64(pad))])
        pos = g.op("Gather", [g.const("embeddings.position", positions), pos_ids])
        # RoBERTa never receives token types: row 0 of the table is a constant offset.
        summed = g.op(
            "Add", [g.op("Add", [word, g.const("embeddings.token_type0", token_types[0])]), pos]
        )
    return g.layer_norm(
        summed,
        ck.get("embeddings.LayerNorm.weight"),
        ck.get("embeddings.LayerNorm.bias"),
        float(config.get("layer_norm_eps", 1e-12)),
        "embeddings.ln",
    )


def _layer(
    g: GraphBuilder, ck: _Checkpoint, config: dict[str, Any], i: int, x: str, bias: str
) -> str:
    hidden = int(config["hidden_size"])
    heads = int(config["num_attention_heads"])
    head_dim = hidden // heads
    eps = float(config.get("layer_norm_eps", 1e-12))
    p = f"encoder.layer.{i}."
    # One fused Q/K/V projection: a single wider GEMM is faster than three on CPU.
    qkv_w = np.concatenate(
        [ck.get(p + f"attention.self.{n}.weight") for n in ("query", "key", "value")]
    ).T
    qkv_b = np.concatenate(
        [ck.get(p + f"attention.self.{n}.bias") for n in ("query", "key", "value")]
    )
    qkv = g.op(
        "Add",
        [g.op("MatMul", [x, g.const(f"l{i}.qkv.weight", np.ascontiguousarray(qkv_w))]),
         g.const(f"l{i}.qkv.bias", qkv_b)],
    )  # fmt: skip
    split = [f"l{i}.q", f"l{i}.k", f"l{i}.v"]
    g.nodes.append(
        helper.make_node(
            "Split", [qkv, g.const("qkv_split", [hidden] * 3)], split, name=f"Split_l{i}", axis=-1
        )
    )
    heads_shape = g.const("heads_shape", [0, 0, heads, head_dim])
    q = g.op("Transpose", [g.op("Reshape", [split[0], heads_shape])], perm=[0, 2, 1, 3])
    k = g.op("Transpose", [g.op("Reshape", [split[1], heads_shape])], perm=[0, 2, 3, 1])
    v = g.op("Transpose", [g.op("Reshape", [split[2], heads_shape])], perm=[0, 2, 1, 3])
    scores = g.op("Div", [g.op("MatMul", [q, k]), g.const("sqrt_head_dim", math.sqrt(head_dim))])
    probs = g.op("Softmax", [g.op("Add", [scores, bias])], axis=-1)
    context = g.op("Transpose", [g.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])
    context = g.op("Reshape", [context, g.const("hidden_shape", [0, 0, hidden])])
    attn = g.linear(
        context,
        ck.get(p + "attention.output.dense.weight"),
        ck.get(p + "attention.output.dense.bias"),
        f"l{i}.attn_out",
    )
    h1 = g.layer_norm(
        g.op("Add", [attn, x]),
        ck.get(p + "attention.output.LayerNorm.weight"),
        ck.get(p + "attention.output.LayerNorm.bias"),
        eps,
        f"l{i}.attn_ln",
    )
    inter = g.linear(
        h1, ck.get(p + "intermediate.dense.weight"), ck.get(p + "intermediate.dense.bias"),
        f"l{i}.intermediate",
    )  # fmt: skip
    inter = g.activation(inter, str(config.get("hidden_act", "gelu")))
    out = g.linear(
        inter, ck.get(p + "output.dense.weight"), ck.get(p + "output.dense.bias"), f"l{i}.output"
    )
    return g.layer_norm(
        g.op("Add", [out, h1]),
        ck.get(p + "output.LayerNorm.weight"),
        ck.get(p + "output.LayerNorm.bias"),
        eps,
        f"l{i}.output_ln",
    )


def _classifier(
    g: GraphBuilder, ck: _Checkpoint, hidden_state: str, is_bert: bool
) -> tuple[str, int]:
    """Sequence-classification head on the first token; returns (logits, num_labels)."""
    cls = g.op("Gather", [hidden_state, g.const("zero_scalar", np.int64(0))], axis=1)
    if is_bert:
        # BertForSequenceClassification: pooler (dense + tanh on [CLS]) then classifier.
        if not ck.has("pooler.dense.weight") or not ck.has("classifier.weight", encoder=False):
            raise ModelError("checkpoint has no BERT pooler/classifier head (not a cross-encoder)")
        pooled = g.op(
            "Tanh",
            [g.linear(cls, ck.get("pooler.dense.weight"), ck.get("pooler.dense.bias"), "pooler")],
        )
        weight = ck.get("classifier.weight", encoder=False)
        logits = g.linear(pooled, weight, ck.get("classifier.bias", encoder=False), "classifier")
        return logits, int(weight.shape[0])
    # RobertaClassificationHead: dense -> tanh -> out_proj on <s>.
    if not ck.has("classifier.dense.weight", encoder=False):
        raise ModelError("checkpoint has no RoBERTa classification head (not a cross-encoder)")
    dense = g.linear(
        cls,
        ck.get("classifier.dense.weight", encoder=False),
        ck.get("classifier.dense.bias", encoder=False),
        "classifier.dense",
    )
    weight = ck.get("classifier.out_proj.weight", encoder=False)
    logits = g.linear(
        g.op("Tanh", [dense]),
        weight,
        ck.get("classifier.out_proj.bias", encoder=False),
        "classifier.out_proj",
    )
    return logits, int(weight.shape[0])


def build_encoder_graph(
    config: dict[str, Any], weights: dict[str, Array], task: str
) -> tuple[onnx.GraphProto, dict[str, Array]]:
    """Build the graph (without initialisers) and the initialiser arrays it refers to."""
    if task not in ("embed", "rerank"):
        raise ModelError(f"task must be 'embed' or 'rerank', got {task!r}")
    check_config(config)
    model_type = str(config["model_type"])
    is_bert = model_type == "bert"
    ck = _Checkpoint(weights, model_type)
    g = GraphBuilder()

    # Additive mask bias [B, 1, 1, S], computed once and shared by all layers.
    mask = g.op("Cast", ["attention_mask"], to=TensorProto.FLOAT)
    mask = g.op("Unsqueeze", [mask, g.const("axes_1_2", [1, 2])])
    bias = g.op("Mul", [g.op("Sub", [g.const("one", 1.0), mask]), g.const("mask_bias", MASK_BIAS)])

    hidden_state = _embeddings(g, ck, config, is_bert)
    for i in range(int(config["num_hidden_layers"])):
        hidden_state = _layer(g, ck, config, i, hidden_state, bias)

    dyn = ["batch", "sequence"]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, dyn)]
    inputs.append(helper.make_tensor_value_info("attention_mask", TensorProto.INT64, dyn))
    if is_bert:
        inputs.append(helper.make_tensor_value_info("token_type_ids", TensorProto.INT64, dyn))
    if task == "embed":
        g.op("Identity", [hidden_state], out="last_hidden_state")
        output = helper.make_tensor_value_info(
            "last_hidden_state",
            TensorProto.FLOAT,
            ["batch", "sequence", int(config["hidden_size"])],
        )
    else:
        logits, num_labels = _classifier(g, ck, hidden_state, is_bert)
        g.op("Identity", [logits], out="logits")
        output = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", num_labels])
    graph = helper.make_graph(g.nodes, f"{model_type}-{task}", inputs, [output])
    return graph, g.initializers


def export_encoder(
    config: dict[str, Any],
    weights: dict[str, Array],
    out_path: str | Path,
    task: str = "embed",
    external_data: bool | None = None,
) -> Path:
    """Write the ONNX graph of a BERT-family encoder given its config and weights.

    ``external_data`` forces or forbids a side file; by default it is used for models whose
    weights exceed ~1.8 GB. Returns the path of the written ``.onnx`` file.
    """
    path = Path(out_path)
    path.parent.mkdir(parents=True, exist_ok=True)
    graph, arrays = build_encoder_graph(config, weights, task)
    total = sum(a.nbytes for a in arrays.values())
    external = total > EXTERNAL_DATA_THRESHOLD if external_data is None else external_data
    attach_initializers(graph, arrays, path, external)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="forum-rag-sidecar-native-exporter",
        ir_version=IR_VERSION,
    )
    # Serialise by hand: no timestamps are involved, so equal inputs give byte-identical files.
    path.write_bytes(model.SerializeToString())
    onnx.checker.check_model(str(path))
    return path


def export_native(model_dir: str | Path, out_path: str | Path, task: str = "embed") -> Path:
    """Export a Hugging Face model directory (``config.json`` + safetensors) to ONNX."""
    config = load_config(model_dir)
    check_config(config)
    return export_encoder(config, load_weights(model_dir), out_path, task)
