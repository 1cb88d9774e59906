"""Ollama's chat API through the official ``ollama`` client: the condenser's and the answer's.

``chat`` (the condenser) is not streamed on purpose: the client's timeout then bounds the whole
call, where a stream would only bound the gap between two pieces. ``stream_chat`` (the answer)
is streamed: the answer service measures the time to first token and holds its own deadline
between pieces.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import ollama

from sidecar.answer.llm import LLMFailure, LLMHTTPError, LLMTimeout, LLMUnavailable, Usage


def _failure(exc: BaseException, host: str) -> LLMFailure:
    """The kind of failure an exception of the client (or of httpx under it) is."""
    if isinstance(exc, httpx.TimeoutException):
        return LLMTimeout(f"no reply within the timeout ({type(exc).__name__})")
    if isinstance(exc, ollama.ResponseError):
        return LLMHTTPError(exc.status_code, str(exc.error)[:300])
    # The client turns httpx.ConnectError into ConnectionError, except in a stream.
    if isinstance(exc, ConnectionError | httpx.ConnectError):
        return LLMUnavailable(f"cannot connect to {host}")
    if isinstance(exc, httpx.HTTPError):
        return LLMFailure(f"{type(exc).__name__}: {exc}"[:300])
    return LLMFailure(f"unreadable reply: {exc}"[:300])  # not Ollama at that address


_CLIENT_ERRORS = (httpx.HTTPError, ollama.ResponseError, ConnectionError, ValueError)


class OllamaChat:
    """One Ollama model: ``think: false``, a keep-alive, a timeout and generation options."""

    kind = "ollama"

    def __init__(
        self,
        host: str,
        model: str,
        *,
        timeout_s: float,
        keep_alive: str | float | None = "30m",
        options: dict[str, Any] | None = None,
    ) -> None:
        self.host = self.url = host
        self._model = model
        self.keep_alive = keep_alive
        # A query is short: cap generation so a runaway model cannot hold the request.
        self.options = {"temperature": 0, "num_predict": 128, **(options or {})}
        # httpx builds a TLS context for each client it makes (~20 ms: it loads the CA bundle);
        # each answer has a client of its own (its timeout is what is left of its deadline), so
        # they all share this one.
        self.tls = httpx.create_ssl_context()
        self.client = ollama.Client(host=host, timeout=timeout_s, verify=self.tls)

    @property
    def model(self) -> str:
        """The configured model name."""
        return self._model

    def chat(self, messages: Sequence[dict[str, str]]) -> str:
        """One non-streamed chat call; every failure becomes an :class:`LLMFailure`."""
        try:
            response = self.client.chat(
                model=self._model, messages=list(messages), think=False,
                keep_alive=self.keep_alive, options=self.options, stream=False,
            )
        except _CLIENT_ERRORS as exc:
            raise _failure(exc, self.host) from exc
        return response.message.content or ""

    def stream_chat(self, messages: Sequence[dict[str, str]], timeout_s: float) -> _OllamaStream:
        """A streamed chat call (NDJSON), opened when first iterated, on a client of its own
        whose timeout is what is left of the answer's deadline."""
        return _OllamaStream(self, list(messages), timeout_s)

    def close(self) -> None:
        """Close the HTTP connections."""
        self.client.close()


class _OllamaStream:
    """The pieces of one streamed reply; ``usage`` is filled by the last (``done``) chunk."""

    def __init__(self, llm: OllamaChat, messages: list[dict[str, str]], timeout_s: float
                 ) -> None:
        self.llm = llm
        self.messages = messages
        self.usage = Usage()
        self.client = ollama.Client(host=llm.host, timeout=timeout_s, verify=llm.tls)
        self._chunks: Iterator[Any] | None = None

    def __iter__(self) -> Iterator[str]:
        llm = self.llm
        try:
            self._chunks = self.client.chat(
                model=llm.model, messages=self.messages, think=False,
                keep_alive=llm.keep_alive, options=llm.options, stream=True)
            for chunk in self._chunks:
                if chunk.done:
                    self.usage = Usage(chunk.prompt_eval_count, chunk.eval_count)
                text = chunk.message.content or ""
                if text:
                    yield text
        except _CLIENT_ERRORS as exc:
            raise _failure(exc, llm.host) from exc

    def close(self) -> None:
        """Close the response: Ollama stops generating when its client goes."""
        close = getattr(self._chunks, "close", None)
        if callable(close):
            close()
        self.client.close()
