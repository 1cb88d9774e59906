"""A small ONNX graph builder: generated node names, named initialisers, common blocks."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper

from models.errors import ModelError

Array = npt.NDArray[Any]


class GraphBuilder:
    """Accumulates nodes and initialisers with generated unique names."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: dict[str, Array] = {}
        self._counter = 0

    def const(self, name: str, value: Array | np.generic | float | list[int]) -> str:
        array = np.asarray(value)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        # Not np.ascontiguousarray: it turns 0-d arrays into 1-d ones, and Gather needs a scalar.
        self.initializers[name] = array if array.flags.c_contiguous else array.copy(order="C")
        return name

    def op(self, op_type: str, inputs: list[str], out: str | None = None, **attrs: Any) -> str:
        self._counter += 1
        output = out or f"{op_type.lower()}_{self._counter}"
        self.nodes.append(
            helper.make_node(op_type, inputs, [output], name=f"{op_type}_{self._counter}", **attrs)
        )
        return output

    def linear(self, x: str, weight: Array, bias: Array, name: str) -> str:
        """``x @ weight.T + bias`` with a PyTorch ``[out, in]`` weight (stored transposed)."""
        w = self.const(f"{name}.weight", np.ascontiguousarray(weight.T))
        b = self.const(f"{name}.bias", bias)
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def layer_norm(self, x: str, weight: Array, bias: Array, eps: float, name: str) -> str:
        return self.op(
            "LayerNormalization",
            [x, self.const(f"{name}.weight", weight), self.const(f"{name}.bias", bias)],
            axis=-1,
            epsilon=eps,
        )

    def activation(self, x: str, kind: str) -> str:
        if kind == "gelu":
            # Exact erf GELU in the Div/Erf/Add/Mul/Mul order of PyTorch's exporter, which
            # onnxruntime's optimiser recognises and fuses into a single Gelu kernel.
            erf = self.op("Erf", [self.op("Div", [x, self.const("gelu.sqrt2", math.sqrt(2.0))])])
            inner = self.op("Mul", [x, self.op("Add", [erf, self.const("one", 1.0)])])
            return self.op("Mul", [inner, self.const("half", 0.5)])
        if kind in ("gelu_new", "gelu_pytorch_tanh", "gelu_fast"):
            cube = self.op("Mul", [self.op("Mul", [x, x]), x])
            inner = self.op("Add", [x, self.op("Mul", [cube, self.const("gelu.c", 0.044715)])])
            scaled = self.op("Mul", [inner, self.const("gelu.k", math.sqrt(2.0 / math.pi))])
            tanh1 = self.op("Add", [self.op("Tanh", [scaled]), self.const("one", 1.0)])
            return self.op("Mul", [self.op("Mul", [x, tanh1]), self.const("half", 0.5)])
        if kind == "relu":
            return self.op("Relu", [x])
        if kind in ("silu", "swish"):
            return self.op("Mul", [x, self.op("Sigmoid", [x])])
        raise ModelError(f"unsupported hidden_act {kind!r}")


def attach_initializers(
    graph: onnx.GraphProto, arrays: dict[str, Array], out_path: Path, external: bool
) -> None:
    """Add initialisers, either inline or streamed into ``<model>.onnx_data``."""
    # Small tensors (shapes, axes, scalars) stay inline: shape inference must read them.
    inline = {n: a for n, a in arrays.items() if not external or a.nbytes < 4096}
    graph.initializer.extend(onnx.numpy_helper.from_array(a, name) for name, a in inline.items())
    if not external:
        return
    # Writing the side file ourselves avoids holding a second in-memory copy of a >2 GB model.
    location = out_path.name + "_data"
    with (out_path.parent / location).open("wb") as fh:
        for name, array in arrays.items():
            if name in inline:
                continue
            offset = fh.tell()
            # 4 KiB alignment lets onnxruntime memory-map the tensors.
            pad = (-offset) % 4096
            fh.write(b"\0" * pad)
            offset += pad
            data = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<")).tobytes()
            fh.write(data)
            tensor = TensorProto(
                name=name,
                dims=list(array.shape),
                data_type=helper.np_dtype_to_tensor_dtype(array.dtype),
                data_location=TensorProto.EXTERNAL,
            )
            for key, value in (("location", location), ("offset", offset), ("length", len(data))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, str(value)
            graph.initializer.append(tensor)
