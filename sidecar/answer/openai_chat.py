"""Any OpenAI-compatible chat-completions server through the official ``openai`` client.

vLLM, llama.cpp's server, LM Studio, Ollama's own ``/v1`` and hosted APIs all speak it. Replies are
streamed (SSE) with ``stream_options.include_usage`` so that the last chunk reports the tokens;
``max_retries=0``: the answer has a deadline, and a retry would spend it behind the member's back.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import openai

from sidecar.answer.llm import LLMFailure, LLMHTTPError, LLMTimeout, LLMUnavailable, Usage


def _failure(exc: openai.OpenAIError, url: str) -> LLMFailure:
    """The kind of failure an exception of the client is."""
    if isinstance(exc, openai.APITimeoutError):
        return LLMTimeout(f"no reply within the timeout ({type(exc).__name__})")
    if isinstance(exc, openai.APIConnectionError):
        return LLMUnavailable(f"cannot connect to {url}")
    if isinstance(exc, openai.APIStatusError):
        return LLMHTTPError(exc.status_code, str(exc.message)[:300])
    return LLMFailure(f"{type(exc).__name__}: {exc}"[:300])


class OpenAIChat:
    """One model of an OpenAI-compatible server (``url``: its base, ending in ``/v1``)."""

    kind = "openai"

    def __init__(self, url: str, model: str, *, api_key: str | None, timeout_s: float,
                 temperature: float, max_tokens: int) -> None:
        self.url = url
        self._model = model
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        # A local server takes any key; the client insists on one.
        self.client = openai.OpenAI(base_url=url, api_key=api_key or "not-needed",
                                    timeout=timeout_s, max_retries=0)

    @property
    def model(self) -> str:
        """The configured model name."""
        return self._model

    def chat(self, messages: Sequence[dict[str, str]]) -> str:
        """One reply, whole (read from the stream)."""
        stream = self.stream_chat(messages, timeout_s=self.timeout_s)
        try:
            return "".join(stream)
        finally:
            stream.close()

    def stream_chat(self, messages: Sequence[dict[str, str]], timeout_s: float) -> _OpenAIStream:
        """A streamed chat completion, opened when first iterated."""
        return _OpenAIStream(self, list(messages), timeout_s)

    def close(self) -> None:
        """Close the HTTP connections."""
        self.client.close()


class _OpenAIStream:
    """The pieces of one streamed completion; ``usage`` comes with its last chunk."""

    def __init__(self, llm: OpenAIChat, messages: list[dict[str, str]], timeout_s: float
                 ) -> None:
        self.llm = llm
        self.messages = messages
        self.timeout_s = timeout_s
        self.usage = Usage()
        self._stream: Any = None

    def __iter__(self) -> Iterator[str]:
        llm = self.llm
        try:
            # The messages are plain role/content dicts, which the client's TypedDicts accept
            # at run time.
            self._stream = llm.client.chat.completions.create(  # type: ignore[call-overload]
                model=llm.model, messages=self.messages,
                temperature=llm.temperature, max_tokens=llm.max_tokens, stream=True,
                stream_options={"include_usage": True}, timeout=self.timeout_s)
            for chunk in self._stream:
                if chunk.usage is not None:
                    self.usage = Usage(chunk.usage.prompt_tokens, chunk.usage.completion_tokens)
                for choice in chunk.choices:
                    text = choice.delta.content if choice.delta else None
                    if text:
                        yield text
        except openai.OpenAIError as exc:
            raise _failure(exc, llm.url) from exc

    def close(self) -> None:
        """Close the response: the server stops generating when its client goes."""
        if self._stream is not None:
            self._stream.close()
