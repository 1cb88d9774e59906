"""Cross-encoder reranking with ONNX Runtime."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from models.base import OnnxModel, pick_output, validate_texts
from models.batching import DEFAULT_MAX_BATCH_SIZE, DEFAULT_MAX_BATCH_TOKENS
from models.errors import ModelInputError, ModelLoadError


class OnnxCrossEncoder(OnnxModel):
    """A Hugging Face sequence-classification cross-encoder exported to ONNX.

    Works with BERT-style graphs (with ``token_type_ids``) and XLM-RoBERTa-style graphs
    (without), e.g. ``cross-encoder/mmarco-mMiniLMv2-L12-H384-v1``. The graph must output
    ``logits`` of shape ``[batch, num_labels]``.
    """

    def __init__(
        self,
        model_dir: str | Path,
        provider: str = "cpu",
        threads: int = 0,
        inter_op_threads: int = 0,
        max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
        max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
        verify: bool = True,
    ) -> None:
        super().__init__(
            model_dir, "rerank", provider, threads, inter_op_threads, max_batch_tokens,
            max_batch_size, verify,
        )  # fmt: skip
        outputs = [o.name for o in self.session.get_outputs()]
        self._output = pick_output(outputs, "rerank")
        if len(self.session.get_outputs()[outputs.index(self._output)].shape) != 2:
            raise ModelLoadError(self.onnx_path, f"output {self._output!r} is not [batch, labels]")

    @property
    def num_labels(self) -> int:
        """Number of logits per pair (1 for the usual relevance cross-encoder)."""
        return self.manifest.dimensions

    def score(self, query: str, passages: Sequence[str]) -> npt.NDArray[np.float32]:
        """Raw relevance logits of ``query`` against each passage, in passage order.

        Shape ``(len(passages),)`` when the model has one label, else
        ``(len(passages), num_labels)``. Each pair is truncated to ``max_length`` by cutting the
        passage (see :meth:`TextTokenizer.encode_pairs`). Raises :class:`ModelInputError` for an
        empty query, an empty passage list, or an empty / non-string passage.
        """
        if not isinstance(query, str) or not query.strip():
            raise ModelInputError("query must be a non-empty string")
        items = validate_texts(passages, "passages")
        pairs = self.tokenizer.encode_pairs(query, items)
        result = np.empty((len(items), self.num_labels), dtype=np.float32)
        for indices in self.plan([len(ids) for ids, _ in pairs]):
            padded = self.pad([pairs[i][0] for i in indices], [pairs[i][1] for i in indices])
            logits = np.asarray(self.session.run([self._output], self.feeds(padded))[0])
            if logits.shape[1] != self.num_labels:
                raise ModelLoadError(
                    self.onnx_path,
                    f"graph produced {logits.shape[1]} logits, manifest says {self.num_labels}",
                )
            result[indices] = logits
        return result[:, 0].copy() if self.num_labels == 1 else result

    def warmup(self) -> None:
        """Score one small batch so the first real request does not pay for allocations."""
        self.score("warm-up query", ["a passage", "another, slightly longer, warm-up passage"])
