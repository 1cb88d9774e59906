"""What the ONNX embedder and cross-encoder share: loading, input validation, padding, batching."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from models.batching import plan_batches
from models.errors import ModelInputError, ModelLoadError
from models.manifest import compute_checksum, read_manifest
from models.runtime import active_provider, create_session
from models.tokenization import PaddedBatch, TextTokenizer, pad_batch

_KNOWN_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# Output names by preference: token states (we pool), or an already pooled sentence vector.
EMBED_OUTPUTS = ("last_hidden_state", "sentence_embedding", "token_embeddings")
RERANK_OUTPUTS = ("logits",)
# Attention scores are batch x heads x len² floats; cap batch x len² so one batch of very long
# texts (bge-m3 takes 8192 tokens) cannot allocate tens of GB. 32 x 512² keeps short-text
# batching untouched.
DEFAULT_MAX_ATTENTION_CELLS = 32 * 512 * 512


def pick_output(names: Sequence[str], task: str) -> str:
    """The graph output to read for ``task`` (first preferred name present, else the first)."""
    preferred = EMBED_OUTPUTS if task == "embed" else RERANK_OUTPUTS
    return next((n for n in preferred if n in names), names[0])


def validate_texts(texts: Any, what: str = "texts") -> list[str]:
    """Return ``texts`` as a list, or raise :class:`ModelInputError` explaining what is wrong."""
    if isinstance(texts, str | bytes) or not isinstance(texts, Sequence):
        raise ModelInputError(f"{what} must be a list of strings, got {type(texts).__name__}")
    if len(texts) == 0:
        raise ModelInputError(f"{what} must not be empty")
    items = list(texts)
    for index, text in enumerate(items):
        if not isinstance(text, str):
            raise ModelInputError(f"{what}[{index}] must be a string, got {type(text).__name__}")
        if not text.strip():
            raise ModelInputError(f"{what}[{index}] is empty or whitespace only")
    return items


class OnnxModel:
    """A prepared model directory opened with ONNX Runtime (manifest, tokenizer, session)."""

    def __init__(
        self,
        model_dir: str | Path,
        task: str,
        provider: str,
        threads: int,
        inter_op_threads: int,
        max_batch_tokens: int,
        max_batch_size: int,
        verify: bool,
    ) -> None:
        self.model_dir = Path(model_dir)
        self.manifest = read_manifest(self.model_dir)
        self.onnx_path = self.model_dir / self.manifest.onnx_file
        if self.manifest.task != task:
            raise ModelLoadError(
                self.model_dir, f"manifest task is {self.manifest.task!r}, expected {task!r}"
            )
        if not self.onnx_path.is_file():
            raise ModelLoadError(self.onnx_path, "ONNX file named in manifest.json not found")
        if verify:
            # Catches truncated copies and hand-edited models before they serve wrong vectors.
            actual = compute_checksum(self.onnx_path)
            if actual != self.manifest.checksum:
                raise ModelLoadError(
                    self.onnx_path,
                    f"checksum mismatch (manifest {self.manifest.checksum[:12]}…, "
                    f"file {actual[:12]}…); re-run `models prepare`",
                )
        self.tokenizer = TextTokenizer.from_dir(self.model_dir, self.manifest.max_length)
        self.session = create_session(self.onnx_path, provider, threads, inter_op_threads)
        self.input_names = [i.name for i in self.session.get_inputs()]
        unknown = [n for n in self.input_names if n not in _KNOWN_INPUTS]
        if unknown or "input_ids" not in self.input_names:
            raise ModelLoadError(
                self.onnx_path, f"unsupported graph inputs {self.input_names} (need input_ids)"
            )
        self.max_batch_tokens = max_batch_tokens
        self.max_batch_size = max_batch_size

    @property
    def name(self) -> str:
        """Model name from the manifest."""
        return self.manifest.name

    @property
    def max_length(self) -> int:
        """Maximum sequence length in tokens, special tokens included."""
        return self.manifest.max_length

    @property
    def provider(self) -> str:
        """Execution provider actually in use ("cpu", "cuda", "openvino")."""
        return active_provider(self.session)

    @property
    def takes_token_type_ids(self) -> bool:
        """Whether the graph has a ``token_type_ids`` input (BERT does, XLM-RoBERTa does not)."""
        return "token_type_ids" in self.input_names

    def pad(
        self, batch: Sequence[Sequence[int]], type_ids: Sequence[Sequence[int]] | None = None
    ) -> PaddedBatch:
        """Right-pad a batch of token id lists with the tokenizer's pad id."""
        return pad_batch(batch, self.tokenizer.pad_id, type_ids)

    def feeds(self, padded: PaddedBatch) -> dict[str, npt.NDArray[np.int64]]:
        """The input dict the graph expects (only the inputs it declares)."""
        available = {
            "input_ids": padded.input_ids,
            "attention_mask": padded.attention_mask,
            "token_type_ids": padded.token_type_ids,
        }
        return {name: available[name] for name in self.input_names}

    def plan(self, lengths: Sequence[int]) -> list[list[int]]:
        """Length-aware index batches for sequences of the given token lengths."""
        return plan_batches(
            lengths, self.max_batch_tokens, self.max_batch_size, DEFAULT_MAX_ATTENTION_CELLS
        )
