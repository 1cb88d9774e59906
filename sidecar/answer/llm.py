"""What the sidecar asks of an LLM, whatever the server: one interface, two kinds behind it.

- :class:`ChatLLM`: one reply, whole (the condenser's short query);
- :class:`AnswerLLM`: a reply streamed piece by piece (the answer: its time to first token, its
  deadline checked between pieces, and a call cancelled when the member leaves).

Behind them: Ollama's ``/api/chat`` through the official ``ollama`` client
(:mod:`sidecar.answer.ollama`) and any OpenAI-compatible chat-completions server through the
official ``openai`` client (:mod:`sidecar.answer.openai_chat`); the settings choose one
(:mod:`sidecar.answer.llm_servers`). Failures are sorted into the few
kinds the trace and the ask log report (timeout, unreachable, HTTP error, anything else), so they
can say why without a stack trace.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol


class LLMFailure(Exception):
    """A chat call that gave no usable reply; ``reason`` is the trace's short form."""

    reason = "error"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class LLMTimeout(LLMFailure):
    """No reply within the timeout."""

    reason = "timeout"


class LLMUnavailable(LLMFailure):
    """Nothing answers at the configured address (the server not running, wrong host)."""

    reason = "error:unreachable"


class LLMHTTPError(LLMFailure):
    """The server answered with an error status (model not found, out of memory...)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.reason = f"error:http_{status}"


class ChatLLM(Protocol):
    """What the condenser needs from a chat model."""

    @property
    def model(self) -> str:
        """The model name (part of the cache key)."""
        ...

    def chat(self, messages: Sequence[dict[str, str]]) -> str:
        """The assistant's reply text; raises :class:`LLMFailure`."""
        ...


@dataclass
class Usage:
    """Tokens of one call, where the server reports them."""

    prompt_tokens: int | None = None
    reply_tokens: int | None = None


class ReplyStream(Protocol):
    """A reply being streamed: iterate for its text pieces, then read ``usage``.

    Iterating raises :class:`LLMFailure`; ``close`` ends the call (the server sees the
    connection close and stops generating). Both are called from the one thread that reads it.
    """

    usage: Usage

    def __iter__(self) -> Iterator[str]:
        """The reply's text, piece by piece."""
        ...

    def close(self) -> None:
        """Stop the call now."""
        ...


class AnswerLLM(Protocol):
    """What the answer needs from a chat model: a streamed reply."""

    kind: str  # "ollama" or "openai"
    url: str

    @property
    def model(self) -> str:
        """The model name."""
        ...

    def stream_chat(self, messages: Sequence[dict[str, str]], timeout_s: float) -> ReplyStream:
        """Start a streamed reply (the connection opens when it is first iterated); no read
        waits longer than ``timeout_s``."""
        ...

    def close(self) -> None:
        """Close the HTTP connections."""
        ...
