"""Export arbitrary Hugging Face models with optimum (optional ``export`` extra, needs torch)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from models.errors import ModelError

_INSTALL_HINT = "pip install '.[export]'"
_OPTIMUM_TASKS = {"embed": "feature-extraction", "rerank": "text-classification"}


def optimum_available() -> bool:
    """True when torch and optimum's ONNX exporter can be imported."""
    try:
        import optimum.exporters.onnx  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def export_with_optimum(source: str, task: str, out_dir: str | Path, opset: int = 17) -> Path:
    """Export ``source`` (local HF model dir or hub id) to ``out_dir/model.onnx`` with optimum.

    ``embed`` exports the base model (output ``last_hidden_state``; pooling happens in our
    runtime), ``rerank`` a sequence-classification model (output ``logits``). The tokenizer and
    config files are saved next to the graph. Raises :class:`ModelError` with the install hint
    when the extra is missing.
    """
    if task not in _OPTIMUM_TASKS:
        raise ModelError(f"task must be 'embed' or 'rerank', got {task!r}")
    try:
        from optimum.exporters.onnx import main_export
    except ImportError as exc:
        raise ModelError(
            f"exporting {source!r} needs torch and optimum, which are not installed; "
            f"install the optional extra with: {_INSTALL_HINT}"
        ) from exc
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    kwargs: dict[str, Any] = {
        "model_name_or_path": source,
        "output": out,
        "task": _OPTIMUM_TASKS[task],
        "opset": opset,
        # "transformers" keeps a sentence-transformers checkpoint from being exported with its
        # pooling baked in: our runtime pools according to the manifest.
        "library_name": "transformers",
        "do_validation": False,
    }
    try:
        main_export(**kwargs)
    except Exception as exc:
        raise ModelError(f"optimum could not export {source!r}: {exc}") from exc
    path = out / "model.onnx"
    if not path.is_file():
        raise ModelError(f"optimum did not produce {path}")
    return path
