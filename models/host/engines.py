"""The models behind the host's routes: each with its micro-batcher and its TEI ``/info``."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from importlib import metadata
from typing import Any, Literal, cast

import numpy as np
import numpy.typing as npt

from models.host.batcher import MicroBatcher
from models.host.config import HostConfig
from models.host.metrics import HostMetrics
from models.protocols import Embedder, Reranker
from models.tokenization import TextTokenizer, TokenInfo

Kind = Literal["passage", "query"]
FloatArray = npt.NDArray[np.float32]


def _version() -> str:
    try:
        return metadata.version("forum-rag-sidecar")
    except metadata.PackageNotFoundError:
        return "0"


def _common_info(model: Any, config: HostConfig) -> dict[str, Any]:
    """The TEI ``/info`` fields shared by both kinds of model, plus our own extensions."""
    manifest = getattr(model, "manifest", None)
    quantization = getattr(manifest, "quantization", "none")
    checksum = getattr(manifest, "checksum", None)
    return {
        "model_id": model.name,
        "model_sha": checksum,
        "model_dtype": "int8" if quantization == "int8" else "float32",
        "max_input_length": int(getattr(model, "max_length", 0)) or None,
        "max_batch_tokens": getattr(model, "max_batch_tokens", None),
        "max_batch_requests": config.max_batch,
        "max_client_batch_size": config.max_inputs,
        "max_concurrent_requests": config.max_queue,
        "auto_truncate": False,
        "tokenization_workers": None,
        "version": _version(),
        "sha": None,
        "docker_label": None,
        # Not in TEI: where the model runs, and the limits our client adapts to.
        "provider": model.provider,
        "max_input_chars": config.max_input_chars,
        "quantization": quantization,
    }


class EmbedEngine:
    """The embedder behind ``/embed`` and ``/tokenize``."""

    def __init__(self, model: Embedder, config: HostConfig, metrics: HostMetrics) -> None:
        self.model = model
        self.config = config
        # A model that can skip normalisation lets one batch serve requests that asked for
        # normalized and for raw vectors alike.
        self._raw = "normalize" in inspect.signature(model.embed).parameters
        manifest = getattr(model, "manifest", None)
        self.prompts: dict[str, str] = {
            "query": getattr(manifest, "query_prefix", ""),
            "passage": getattr(manifest, "passage_prefix", ""),
        }
        self.batcher: MicroBatcher[tuple[str, Kind], FloatArray] = MicroBatcher(
            self._run, max_batch=config.max_batch, max_wait_ms=config.max_wait_ms,
            max_queue=config.max_queue, name="embed", on_batch=metrics.observer("embed"),
        )  # fmt: skip

    @property
    def tokenizer(self) -> TextTokenizer | None:
        """The model's tokenizer, when it has one (``/tokenize`` needs it)."""
        tokenizer = getattr(self.model, "tokenizer", None)
        return tokenizer if isinstance(tokenizer, TextTokenizer) else None

    def _run(self, items: list[tuple[str, Kind]]) -> list[FloatArray]:
        # Queries and passages share a model call unless their prefixes differ.
        same = self.prompts["query"] == self.prompts["passage"]
        groups: dict[Kind, list[int]] = {}
        for index, (_, kind) in enumerate(items):
            groups.setdefault("passage" if same else kind, []).append(index)
        out: list[FloatArray] = [np.empty(0, dtype=np.float32)] * len(items)
        for kind, indices in groups.items():
            texts = [items[i][0] for i in indices]
            if self._raw:
                vectors = cast(Any, self.model).embed(texts, kind=kind, normalize=False)
            else:
                vectors = self.model.embed(texts, kind=kind)
            for row, index in enumerate(indices):
                out[index] = vectors[row]
        return out

    def tokens_over(self, text: str, kind: Kind) -> tuple[int, int] | None:
        """``(tokens, limit)`` when ``text`` is longer than the model takes, else None."""
        limit_of = getattr(self.model, "max_text_tokens", None)
        limit = int(limit_of(kind)) if callable(limit_of) else self.model.max_length - 2
        count = self.model.count_tokens(text)
        return (count, limit) if count > limit else None

    def tokens_seen(self, text: str) -> int:
        """Tokens the model reads for a passage: special and prompt tokens, then the text's,
        cut at the model's window."""
        limit_of = getattr(self.model, "max_text_tokens", None)
        room = int(limit_of("passage")) if callable(limit_of) else self.model.max_length - 2
        return self.model.max_length - room + min(self.model.count_tokens(text), room)

    def describe(self, text: str, add_special_tokens: bool) -> list[TokenInfo]:
        """Tokens of ``text`` with character offsets (``/tokenize``)."""
        tokenizer = self.tokenizer
        assert tokenizer is not None  # checked by the route
        return tokenizer.describe(text, add_special_tokens)

    def info(self) -> dict[str, Any]:
        """TEI ``/info`` of the embedder."""
        manifest = getattr(self.model, "manifest", None)
        return {
            **_common_info(self.model, self.config),
            "model_type": {"embedding": {"pooling": getattr(manifest, "pooling", "mean")}},
            "dimensions": self.model.dimensions,
            "normalize": bool(getattr(manifest, "normalize", True)),
            "prompts": dict(self.prompts),
        }


class RerankEngine:
    """The cross-encoder behind ``/rerank``."""

    def __init__(self, model: Reranker, config: HostConfig, metrics: HostMetrics) -> None:
        labels = int(getattr(model, "num_labels", 1))
        if labels != 1:
            raise ValueError(
                f"reranking needs a one-logit cross-encoder; {model.name} has {labels}"
            )
        self.model = model
        self.config = config
        self.batcher: MicroBatcher[tuple[str, str], float] = MicroBatcher(
            self._run, max_batch=config.max_batch, max_wait_ms=config.max_wait_ms,
            max_queue=config.max_queue, name="rerank", on_batch=metrics.observer("rerank"),
        )  # fmt: skip

    def _run(self, pairs: list[tuple[str, str]]) -> list[float]:
        score_pairs = getattr(self.model, "score_pairs", None)
        if callable(score_pairs):
            # Pairs of several requests (several queries) in one set of model runs.
            return [float(s) for s in np.asarray(score_pairs(pairs)).reshape(-1)]
        by_query: dict[str, list[int]] = {}
        for index, (query, _) in enumerate(pairs):
            by_query.setdefault(query, []).append(index)
        out = [0.0] * len(pairs)
        for query, indices in by_query.items():
            scores = np.asarray(self.model.score(query, [pairs[i][1] for i in indices]))
            for row, index in enumerate(indices):
                out[index] = float(scores.reshape(-1)[row])
        return out

    def tokens_over(self, query: str, text: str) -> tuple[int, int] | None:
        """``(tokens, limit)`` when the pair is longer than the model takes, else None."""
        tokenizer = getattr(self.model, "tokenizer", None)
        if not isinstance(tokenizer, TextTokenizer):
            return None
        count = tokenizer.count_tokens(query) + tokenizer.count_tokens(text)
        limit = tokenizer.max_pair_content_tokens
        return (count, limit) if count > limit else None

    def info(self) -> dict[str, Any]:
        """TEI ``/info`` of the reranker."""
        return {
            **_common_info(self.model, self.config),
            "model_type": {
                "reranker": {"id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0}}
            },
        }


def normalize_rows(vectors: Sequence[FloatArray]) -> FloatArray:
    """Stack and L2-normalise rows (zero rows stay zero)."""
    matrix = np.asarray(np.stack(vectors), dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.clip(norms, 1e-12, None)).astype(np.float32)
