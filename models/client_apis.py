"""The remote embedder over the APIs of the model servers people already run.

``SIDECAR_EMBED_API`` picks one beside ``SIDECAR_EMBED_URL``:

- ``tei``: Hugging Face text-embeddings-inference, or our own model host
  (:class:`~models.client.RemoteEmbedder`: ``/info``, ``/embed``, ``/tokenize``);
- ``openai``: OpenAI's ``POST /v1/embeddings``, as vLLM, infinity, llama.cpp, TEI and our host
  serve it (:class:`OpenAIEmbedder`);
- ``ollama``: Ollama's ``POST /api/embed`` (:class:`OllamaEmbedder`).

All three share the HTTP plumbing (timeouts, connect retry, error classification) and the
batching of :class:`~models.client.RemoteEmbedder`. The last two have no tokenizer route: the
vectors' size is probed once by embedding a word, the model's window comes from the server when
it says it (``max_model_len`` of ``/v1/models``, ``context_length`` of Ollama's ``/api/show``),
and tokens are *estimated* (words, punctuation marks and CJK characters each count one). The
sidecar cuts a post at that estimate and hashes what it sends; the server cuts whatever is still
over its window, as Ollama does by default and TEI does with ``--auto-truncate``.
"""

from __future__ import annotations

import re
from typing import Any, Literal

import httpx
import numpy as np

from models.client import FloatArray, RemoteEmbedder
from models.errors import RemoteModelError

EmbedApi = Literal["tei", "openai", "ollama"]
# When the server does not say how many tokens its model reads.
DEFAULT_WINDOW = 512
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# One estimated token: a CJK character, a run of other word characters, or a punctuation mark.
_PIECE = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+|[^\w\s]")


def _unit_rows(matrix: FloatArray) -> FloatArray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return (matrix / np.clip(norms, 1e-12, None)).astype(np.float32)


class _EstimatedTokens(RemoteEmbedder):
    """An embedder whose server has no tokenizer route: tokens are estimated (see module)."""

    def count_tokens(self, text: str) -> int:
        """Estimated tokens of ``text``: words, punctuation marks and CJK characters."""
        return sum(1 for _ in _PIECE.finditer(text))

    def max_text_tokens(self, kind: Literal["passage", "query"] = "passage") -> int:
        """Estimated tokens of text that fit in the model's window (two for specials)."""
        return max(0, self.max_length - 2)

    def truncate_text(self, text: str, max_tokens: int | None = None) -> str:
        """``text`` up to the end of its ``max_tokens``-th estimated token (the server cuts the
        rest of what its model cannot read)."""
        limit = self.max_text_tokens()
        limit = limit if max_tokens is None else min(max_tokens, limit)
        if limit < 0:
            raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
        if limit == 0:
            return ""
        for count, piece in enumerate(_PIECE.finditer(text), 1):
            if count == limit:
                return text[: piece.end()]
        return text

    def _model_name(self) -> str:
        if not self._name:
            raise RemoteModelError(self.url, "no model name to ask for (SIDECAR_EMBED_MODEL)")
        return self._name

    def _matrix(self, rows: Any, texts: list[str], route: str) -> FloatArray:
        try:
            matrix = np.asarray(rows, dtype=np.float32)
        except (TypeError, ValueError):
            raise RemoteModelError(self.url, f"{route} did not return vectors") from None
        if matrix.ndim != 2 or matrix.shape[0] != len(texts) or not matrix.shape[1]:
            raise RemoteModelError(self.url, f"{route} returned shape {matrix.shape} for "
                                   f"{len(texts)} texts")  # fmt: skip
        return _unit_rows(matrix)

    def _section(self, window: int | None, probe: FloatArray) -> dict[str, Any]:
        """A TEI-shaped ``/info`` of what was learnt from the server."""
        return {"model_id": self._model_name(), "model_type": {"embedding": {}},
                "dimensions": int(probe.shape[1]), "max_input_length": window or DEFAULT_WINDOW,
                "normalize": True, "prompts": {}, "provider": "remote"}


class OpenAIEmbedder(_EstimatedTokens):
    """:class:`~models.protocols.Embedder` over OpenAI's ``POST /v1/embeddings``."""

    def __init__(self, url: str, name: str | None = None, timeout: float = 30.0,
                 api_key: str | None = None, transport: httpx.BaseTransport | None = None,
                 ) -> None:  # fmt: skip
        # OpenAI clients take the base URL with its /v1; the routes below carry it.
        url = url.rstrip("/")
        super().__init__(url.removesuffix("/v1"), name, timeout, api_key, transport)

    def _describe(self) -> dict[str, Any]:
        window = None
        try:  # vLLM and our host say the model's window there; OpenAI itself does not
            listed = self.request("GET", "/v1/models")
            for entry in (listed.get("data") or []) if isinstance(listed, dict) else []:
                if isinstance(entry, dict) and entry.get("id") == self._model_name():
                    window = int(entry.get("max_model_len") or 0) or None
        except RemoteModelError:
            pass
        return self._section(window, self._embed(["probe"]))

    def _embed(self, texts: list[str], prompt: str | None = None) -> FloatArray:
        data = self.request("POST", "/v1/embeddings", {
            "model": self._model_name(), "input": texts, "encoding_format": "float"})
        try:
            items = sorted(data["data"], key=lambda item: int(item["index"]))
            rows = [item["embedding"] for item in items]
        except (TypeError, KeyError, ValueError):
            raise RemoteModelError(self.url, "POST /v1/embeddings returned an unexpected body"
                                   ) from None  # fmt: skip
        return self._matrix(rows, texts, "POST /v1/embeddings")


class OllamaEmbedder(_EstimatedTokens):
    """:class:`~models.protocols.Embedder` over Ollama's ``POST /api/embed``.

    Ollama reads ``num_ctx`` tokens (its default is smaller than bge-m3's 8,192): each request
    asks for the model's whole window, and ``truncate`` cuts what is still over it.
    """

    def __init__(self, url: str, name: str | None = None, timeout: float = 30.0,
                 api_key: str | None = None, transport: httpx.BaseTransport | None = None,
                 ) -> None:  # fmt: skip
        super().__init__(url, name, timeout, api_key, transport)
        self._window: int | None = None

    def _describe(self) -> dict[str, Any]:
        shown = self.request("POST", "/api/show", {"model": self._model_name()})
        facts = (shown.get("model_info") or {}) if isinstance(shown, dict) else {}
        window = next((int(v) for k, v in facts.items()
                       if k.endswith(".context_length") and isinstance(v, int)), None)
        self._window = window
        return self._section(window, self._embed(["probe"]))

    def _embed(self, texts: list[str], prompt: str | None = None) -> FloatArray:
        body: dict[str, Any] = {"model": self._model_name(), "input": texts, "truncate": True}
        if self._window:
            body["options"] = {"num_ctx": self._window}
        data = self.request("POST", "/api/embed", body)
        rows = data.get("embeddings") if isinstance(data, dict) else None
        return self._matrix(rows, texts, "POST /api/embed")


def remote_embedder(api: EmbedApi, url: str, **options: Any) -> RemoteEmbedder:
    """The remote embedder that speaks ``api`` (``tei``, ``openai`` or ``ollama``)."""
    kinds: dict[str, type[RemoteEmbedder]] = {"tei": RemoteEmbedder, "openai": OpenAIEmbedder,
                                              "ollama": OllamaEmbedder}
    if api not in kinds:
        raise ValueError(f"unknown embedding API {api!r}; expected one of {sorted(kinds)}")
    return kinds[api](url, **options)
