"""One LLM call under the answer's deadline: read on a thread of its own, waited for here.

The reply is read by a worker thread that puts its pieces on a queue; the request's thread takes
them with a timeout, so the deadline holds whatever the server does (hangs before the first
byte, trickles, stalls mid-answer). Cancelling (the deadline passed, the member left) tells the
reader to stop: it closes the stream from its own thread at the next piece, or when its read
times out (its client's timeout is what was left of the deadline), and only then says it is done,
so the node's count of calls in flight is the truth.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sidecar.answer.llm import AnswerLLM, LLMFailure, LLMTimeout, Usage


class LLMCall:
    """A streamed reply being read; iterate :meth:`pieces`, then read ``text`` and ``usage``."""

    def __init__(self, llm: AnswerLLM, messages: Sequence[dict[str, str]], deadline: float,
                 on_done: Callable[[], None] = lambda: None) -> None:
        """``deadline``: a ``time.monotonic()`` instant; ``on_done`` runs on the reader's thread
        once the call is over, whatever ended it."""
        self.llm = llm
        self.messages = list(messages)
        self.deadline = deadline
        self.on_done = on_done
        self.started = time.monotonic()
        self.first_piece_at: float | None = None
        self.parts: list[str] = []
        self.usage = Usage()
        self._queue: queue.Queue[tuple[str, Any]] = queue.Queue()
        self._cancelled = threading.Event()
        self._thread = threading.Thread(target=self._read, name="llm-call", daemon=True)
        self._thread.start()

    @property
    def text(self) -> str:
        """The reply received so far."""
        return "".join(self.parts)

    @property
    def first_token_ms(self) -> float | None:
        """From the call's start to its first piece of text."""
        if self.first_piece_at is None:
            return None
        return round((self.first_piece_at - self.started) * 1000, 3)

    def _read(self) -> None:
        stream = None
        try:
            stream = self.llm.stream_chat(self.messages,
                                          timeout_s=max(0.05, self.deadline - time.monotonic()))
            for piece in stream:
                if self._cancelled.is_set():
                    return
                self._queue.put(("piece", piece))
            self._queue.put(("end", stream.usage))
        except LLMFailure as exc:
            self._queue.put(("error", exc))
        except Exception as exc:  # a client bug must not kill the thread silently
            self._queue.put(("error", LLMFailure(f"{type(exc).__name__}: {exc}"[:300])))
        finally:
            if stream is not None:
                try:
                    stream.close()
                finally:
                    self.on_done()
            else:
                self.on_done()

    def pieces(self) -> Iterator[str]:
        """The reply's pieces as they come; raises :class:`LLMFailure` (a timeout at the
        deadline) and cancels the call when left early."""
        try:
            while True:
                left = self.deadline - time.monotonic()
                if left <= 0:
                    raise LLMTimeout("the answer's deadline passed")
                try:
                    kind, value = self._queue.get(timeout=left)
                except queue.Empty:
                    raise LLMTimeout("the answer's deadline passed") from None
                if kind == "end":
                    self.usage = value
                    return
                if kind == "error":
                    raise value
                if self.first_piece_at is None:
                    self.first_piece_at = time.monotonic()
                self.parts.append(value)
                yield value
        finally:
            self.cancel()  # a no-op once the reply has ended

    def cancel(self) -> None:
        """Tell the reader to stop (it closes the stream on its own thread)."""
        self._cancelled.set()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the reader to finish; True when it has."""
        self._thread.join(timeout)
        return not self._thread.is_alive()
