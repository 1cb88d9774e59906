"""The LLM adapter: Ollama's chat API through the official ``ollama`` client.

Failures are sorted into the few kinds the condenser reports (timeout, unreachable, HTTP error,
anything else), so the trace can say why it fell back without leaking a stack trace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import httpx
import ollama


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
    """Nothing answers at the configured address (Ollama not running, wrong host)."""

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


class OllamaChat:
    """``POST /api/chat`` (not streamed) with ``think: false``, a keep-alive and a timeout.

    Not streamed on purpose: the client's timeout then bounds the whole call, where a stream
    would only bound the gap between two tokens.
    """

    def __init__(
        self,
        host: str,
        model: str,
        *,
        timeout_s: float,
        keep_alive: str | float | None = "30m",
        options: dict[str, Any] | None = None,
    ) -> None:
        self.host = host
        self._model = model
        self.keep_alive = keep_alive
        # A query is short: cap generation so a runaway model cannot hold the request.
        self.options = {"temperature": 0, "num_predict": 128, **(options or {})}
        self.client = ollama.Client(host=host, timeout=timeout_s)

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
        except httpx.TimeoutException as exc:
            raise LLMTimeout(f"no reply within the timeout ({type(exc).__name__})") from exc
        except ollama.ResponseError as exc:
            raise LLMHTTPError(exc.status_code, str(exc.error)[:300]) from exc
        except ConnectionError as exc:  # the client turns httpx.ConnectError into this
            raise LLMUnavailable(f"cannot connect to {self.host}") from exc
        except httpx.HTTPError as exc:
            raise LLMFailure(f"{type(exc).__name__}: {exc}"[:300]) from exc
        except ValueError as exc:  # an unparsable body (not Ollama at that address)
            raise LLMFailure(f"unreadable reply: {exc}"[:300]) from exc
        return response.message.content or ""

    def close(self) -> None:
        """Close the HTTP connections."""
        self.client.close()
