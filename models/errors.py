"""Exceptions raised by the models package.

The HTTP layer maps :class:`ModelInputError` to a 4xx response; :class:`ModelLoadError` is meant to
abort start-up, so its message always carries the offending path and the reason.
"""

from __future__ import annotations

from pathlib import Path


class ModelError(Exception):
    """Base class of every error raised by the models package."""


class ModelLoadError(ModelError):
    """A model (manifest, tokenizer or ONNX graph) could not be loaded.

    The message always has the form ``"cannot load model at <path>: <reason>"`` so that an operator
    reading a failed start-up log knows which file to look at.
    """

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"cannot load model at {self.path}: {reason}")


class ModelInputError(ModelError, ValueError):
    """The caller passed inputs the model cannot take (empty list, empty text, wrong type)."""
