"""Embedder and Reranker over HTTP: our model host, or a Hugging Face TEI server.

They speak TEI's API (``POST /embed``, ``POST /rerank``, ``POST /tokenize``, ``GET /info``) and
implement :class:`models.protocols.Embedder` / :class:`~models.protocols.Reranker`, so the
sidecar cannot tell them from the in-process ONNX models. Token counting and truncation go
through the server's own tokenizer (``/tokenize`` returns each token's character span), so the
text the sidecar hashes is exactly the text the remote model embeds.

Errors are :class:`~models.errors.RemoteModelError` (with ``status``, ``terminal``,
``transient``) or, when the server refused the inputs themselves,
:class:`~models.errors.RemoteInputError`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import httpx
import numpy as np
import numpy.typing as npt

from models.base import validate_texts
from models.client_http import RemoteModel
from models.errors import ModelInputError, RemoteModelError

Kind = Literal["passage", "query"]
FloatArray = npt.NDArray[np.float32]


class RemoteEmbedder(RemoteModel):
    """:class:`~models.protocols.Embedder` served by a TEI-compatible host."""

    task = "embed"

    def __init__(
        self,
        url: str,
        name: str | None = None,
        timeout: float = 30.0,
        api_key: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(url, name, timeout, api_key, transport)
        self._dimensions: int | None = None
        self._specials: int | None = None
        self._limits: dict[str, int] = {}

    @property
    def dimensions(self) -> int:
        """Vector size: from ``/info`` (our host), else measured once by embedding a probe."""
        if self._dimensions is None:
            declared = self.info().get("dimensions")
            self._dimensions = int(declared) if declared else int(self._embed(["probe"])[0].size)
        return self._dimensions

    def _embed(self, texts: list[str], prompt: str | None = None) -> FloatArray:
        body: dict[str, Any] = {"inputs": texts, "truncate": True,
                                "normalize": bool(self.info().get("normalize", True))}
        if prompt is not None:
            body["prompt_name"] = prompt
        data = self.request("POST", "/embed", body)
        try:
            matrix = np.asarray(data, dtype=np.float32)
        except (TypeError, ValueError):
            raise RemoteModelError(self.url, "POST /embed did not return vectors") from None
        if matrix.ndim != 2 or matrix.shape[0] != len(texts):
            raise RemoteModelError(
                self.url, f"POST /embed returned shape {matrix.shape} for {len(texts)} texts"
            )
        return matrix

    def embed(self, texts: Sequence[str], kind: Kind = "passage") -> FloatArray:
        """float32 ``(len(texts), dimensions)`` in input order; the host truncates long texts.

        ``kind`` is sent as TEI's ``prompt_name`` when the host declares query/passage prompts
        (ours does); a plain TEI server embeds the text as given.
        """
        if kind not in ("passage", "query"):
            raise ModelInputError(f"kind must be 'passage' or 'query', got {kind!r}")
        items = validate_texts(texts)
        prompt = kind if kind in (self.info().get("prompts") or {}) else None
        out = np.empty((len(items), self.dimensions), dtype=np.float32)
        for offset, chunk in self.chunks(items):
            matrix = self._embed(chunk, prompt)
            if matrix.shape[1] != out.shape[1]:
                raise RemoteModelError(self.url, f"POST /embed returned {matrix.shape[1]}-d "
                                       f"vectors; expected {out.shape[1]}")  # fmt: skip
            out[offset : offset + len(chunk)] = matrix
        return out

    # -- tokens --------------------------------------------------------------------------------

    def _tokenize(self, text: str, special: bool = False) -> list[tuple[Any, Any, str]]:
        """``(start, stop, text)`` of every token of ``text`` (offsets None for specials)."""
        data = self.request("POST", "/tokenize", {"inputs": text, "add_special_tokens": special})
        try:
            return [(t.get("start"), t.get("stop"), str(t.get("text", ""))) for t in data[0]]
        except (TypeError, KeyError, IndexError, AttributeError):
            raise RemoteModelError(self.url, "POST /tokenize returned an unexpected body") from None

    def _spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans of the tokens of ``text`` (no special tokens)."""
        if not text.strip():
            return []  # hosts refuse blank inputs; blank text has no tokens anyway
        try:
            return _char_spans(text, self._tokenize(text))
        except (TypeError, ValueError) as exc:
            raise RemoteModelError(self.url, f"POST /tokenize returned bad offsets: {exc}"
                                   ) from None  # fmt: skip

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` as the remote tokenizer counts them (no special tokens).

        A text longer than the host accepts in one piece is counted in pieces cut at
        whitespace.
        """
        cap = int(self.info().get("max_input_chars") or 0) or None
        if cap is None or len(text) <= cap:
            return len(self._spans(text))
        total, start = 0, 0
        while start < len(text):
            end = len(text) if len(text) - start <= cap else text.rfind(" ", start, start + cap)
            end = start + cap if end <= start else end
            total += len(self._spans(text[start:end])) if text[start:end].strip() else 0
            start = end
        return total

    def max_text_tokens(self, kind: Kind = "passage") -> int:
        """Tokens of text that fit after the special tokens and the ``kind`` prompt."""
        if kind not in self._limits:
            if self._specials is None:
                self._specials = len(self._tokenize("a", special=True)) - len(self._tokenize("a"))
            prompt = (self.info().get("prompts") or {}).get(kind) or ""
            prompt_tokens = len(self._spans(prompt)) if prompt.strip() else 0
            self._limits[kind] = self.max_length - self._specials - prompt_tokens
        return self._limits[kind]

    def truncate_text(self, text: str, max_tokens: int | None = None) -> str:
        """Longest prefix of ``text`` that the remote model embeds whole (see OnnxEmbedder)."""
        limit = self.max_text_tokens("passage")
        limit = limit if max_tokens is None else min(max_tokens, limit)
        if limit < 0:
            raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
        spans, complete = self._leading_spans(text, limit)
        if complete and len(spans) <= limit:
            return text
        if len(spans) <= limit:
            # Only reached for >max_input_chars texts with very few tokens: the host itself
            # never reads further than that many characters.
            return text[: int(self.info()["max_input_chars"])]
        keep = limit
        while keep > 0:
            prefix = text[: max(stop for _, stop in spans[:keep])]
            # Like the in-process tokenizer: re-count, since a cut may re-tokenise differently.
            if len(self._spans(prefix)) <= limit:
                return prefix
            keep -= 1
        return ""

    def _leading_spans(self, text: str, need: int) -> tuple[list[tuple[int, int]], bool]:
        """Spans of at least ``need + 2`` leading tokens (or all), tokenizing a growing window.

        Returns the spans and whether the whole text was tokenized. The window keeps requests
        small for huge posts and stays within the host's ``max_input_chars``.
        """
        cap = int(self.info().get("max_input_chars") or 0) or None
        window = max(1024, 8 * (need + 2))
        while True:
            size = min(len(text), window, cap or len(text))
            spans = self._spans(text[:size])
            if size == len(text) or len(spans) >= need + 2 or size == cap:
                return spans, size == len(text)
            window *= 4


def _char_spans(text: str, tokens: list[tuple[Any, Any, str]]) -> list[tuple[int, int]]:
    """Character spans from TEI token offsets, which are characters or (older TEI) bytes."""
    spans = [(int(a), int(b)) for a, b, _ in tokens if a is not None and b is not None]
    if all(text[a:b] == t for a, b, t in tokens if a is not None and b is not None):
        return spans
    encoded = text.encode("utf-8")
    # Byte offsets: map each byte position to the character it starts.
    char_at = np.zeros(len(encoded) + 1, dtype=np.int64)
    position = 0
    for index, char in enumerate(text):
        width = len(char.encode("utf-8"))
        char_at[position : position + width] = index
        position += width
    char_at[len(encoded)] = len(text)
    if any(not 0 <= a <= b <= len(encoded) for a, b in spans):
        raise ValueError("token offsets lie outside the text")
    return [(int(char_at[a]), int(char_at[b])) for a, b in spans]


class RemoteReranker(RemoteModel):
    """:class:`~models.protocols.Reranker` served by a TEI-compatible host."""

    task = "rerank"

    def score(self, query: str, passages: Sequence[str]) -> FloatArray:
        """Raw logits of ``query`` against each passage, in passage order (``raw_scores``)."""
        if not isinstance(query, str) or not query.strip():
            raise ModelInputError("query must be a non-empty string")
        items = validate_texts(passages, "passages")
        out = np.full(len(items), np.nan, dtype=np.float32)
        for offset, chunk in self.chunks(items):
            data = self.request("POST", "/rerank", {"query": query, "texts": chunk,
                                                    "truncate": True, "raw_scores": True})
            try:
                for rank in data:
                    index = int(rank["index"])
                    if not 0 <= index < len(chunk):
                        raise ValueError(index)
                    out[offset + index] = float(rank["score"])
            except (TypeError, KeyError, ValueError):
                raise RemoteModelError(self.url, "POST /rerank returned an unexpected body"
                                       ) from None  # fmt: skip
        if np.isnan(out).any():
            raise RemoteModelError(self.url, "POST /rerank left some texts without a score")
        return out
