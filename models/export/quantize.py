"""Dynamic int8 quantisation of an exported ONNX model."""

from __future__ import annotations

import logging
from pathlib import Path

from models.errors import ModelError
from models.manifest import external_data_files

# Protobuf's 2 GiB message limit. int8 shrinks the MatMul weights ~4x but not every tensor,
# so only sources above twice the limit are quantised into a side file.
_EXTERNAL_THRESHOLD = 1_800_000_000


def quantize_int8(src_onnx: str | Path, dst_onnx: str | Path) -> Path:
    """Write an int8 dynamically-quantised copy of ``src_onnx`` to ``dst_onnx``.

    Weights are quantised per output channel: per-tensor scales lose noticeably more accuracy on
    transformer projections. Activations are quantised at run time (no calibration data needed).
    """
    # Heavy dependency (sympy, onnx's optimiser): loaded only when a model is quantized.
    from onnxruntime.quantization import QuantType, quantize_dynamic

    src, dst = Path(src_onnx), Path(dst_onnx)
    size = src.stat().st_size + sum(p.stat().st_size for p in external_data_files(src))
    dst.parent.mkdir(parents=True, exist_ok=True)
    # The quantizer logs, on the root logger, an advice to run its pre-processing for every
    # model; that is noise here, so only that message is filtered out, only while we quantise.
    root = logging.getLogger()
    root.addFilter(_drop_preprocessing_advice)
    # The quantizer also logs one INFO line per tensor on the root logger (hundreds for a
    # 12-layer model); only warnings are worth showing while it runs.
    level = root.level
    root.setLevel(max(level, logging.WARNING))
    try:
        quantize_dynamic(
            src,
            dst,
            weight_type=QuantType.QInt8,
            per_channel=True,
            use_external_data_format=size > 2 * _EXTERNAL_THRESHOLD,
        )
    except Exception as exc:
        raise ModelError(f"int8 quantisation of {src} failed: {exc}") from exc
    finally:
        root.setLevel(level)
        root.removeFilter(_drop_preprocessing_advice)
    return dst


def _drop_preprocessing_advice(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith("Please consider to run pre-processing")
