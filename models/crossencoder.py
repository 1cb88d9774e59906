"""Cross-encoder reranking with ONNX Runtime."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt

from models.base import OnnxModel, pick_output, validate_texts
from models.batching import DEFAULT_MAX_BATCH_SIZE, DEFAULT_MAX_BATCH_TOKENS
from models.errors import ModelInputError, ModelLoadError


def _check_query(query: object) -> None:
    if not isinstance(query, str) or not query.strip():
        raise ModelInputError("query must be a non-empty string")


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
        _check_query(query)
        items = validate_texts(passages, "passages")
        return self._run_pairs(self.tokenizer.encode_pairs(query, items))

    def score_pairs(self, pairs: Sequence[tuple[str, str]]) -> npt.NDArray[np.float32]:
        """Raw logits of ``(query, passage)`` pairs that may have different queries.

        The model host's micro-batcher uses it to score the pairs of several concurrent requests
        in one set of model runs. Same shapes, truncation and errors as :meth:`score`.
        """
        if not pairs:
            raise ModelInputError("pairs must not be empty")
        by_query: dict[str, list[int]] = {}
        for index, pair in enumerate(pairs):
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise ModelInputError(f"pairs[{index}] must be a (query, passage) pair")
            _check_query(pair[0])
            by_query.setdefault(pair[0], []).append(index)
        validate_texts([p[1] for p in pairs], "passages")
        encoded: list[tuple[list[int], list[int]]] = [([], [])] * len(pairs)
        for query, indices in by_query.items():
            for index, enc in zip(
                indices, self.tokenizer.encode_pairs(query, [pairs[i][1] for i in indices]),
                strict=True,
            ):
                encoded[index] = enc
        return self._run_pairs(encoded)

    def _run_pairs(self, pairs: list[tuple[list[int], list[int]]]) -> npt.NDArray[np.float32]:
        """Length-aware batches of encoded pairs through the graph, back in input order."""
        result = np.empty((len(pairs), self.num_labels), dtype=np.float32)
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
