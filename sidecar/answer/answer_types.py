"""What an answer holds while it is written: its admission ticket and its outcome."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sidecar.answer.llm import Usage
from sidecar.answer.pipeline_types import RetrievalOutcome
from sidecar.answer.sanitize_service import removed_counts
from sidecar.core.sanitize import SanitizeResult


@dataclass
class Ticket:
    """An admitted ask: when it started, its deadline, and its slot among the node's LLM calls.

    The slot is given back once: by the request when no LLM is called (or the request fails
    before), else by the LLM call's reader when the call is really over (``handed``).
    """

    started: float  # time.monotonic()
    deadline: float
    release_slot: Callable[[], None]
    handed: bool = False
    _released: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def release_slot_once(self) -> None:
        """Give the slot back (once, whoever calls first)."""
        with self._lock:
            if self._released:
                return
            self._released = True
        self.release_slot()

    def release(self) -> None:
        """The request is done with the ticket: the slot goes back unless a call holds it."""
        if not self.handed:
            self.release_slot_once()

    def elapsed_ms(self) -> float:
        """Since the ask was admitted."""
        return round((time.monotonic() - self.started) * 1000, 3)


@dataclass
class AnswerOutcome:
    """One ask, as it ended; ``as_dict`` is ``/v1/answer``'s body."""

    answer_id: uuid.UUID
    retrieval: RetrievalOutcome
    streamed: bool
    llm: str | None
    model: str | None
    outcome: str = "answered"
    result: SanitizeResult = field(
        default_factory=lambda: SanitizeResult(text="", citations=[], removed=[]))
    failure_stage: str | None = None
    failure: str | None = None
    first_token_ms: float | None = None
    total_ms: float | None = None
    usage: Usage = field(default_factory=Usage)

    def end(self, outcome: str, result: SanitizeResult, *, stage: str | None = None,
            failure: str | None = None) -> None:
        """Set how the ask ended and what the member is shown."""
        self.outcome, self.result = outcome, result
        self.failure_stage, self.failure = stage, failure

    def as_dict(self) -> dict[str, Any]:
        """The JSON answer of ``POST /v1/answer`` (and the stream's last event)."""
        r = self.retrieval
        return {
            "answer_id": str(self.answer_id),
            "retrieval_id": str(r.retrieval_id),
            "zone": r.zone.value,
            "zone_reason": r.zone_reason,
            "outcome": self.outcome,
            "failure_stage": self.failure_stage,
            "failure": self.failure,
            "answer": {"markdown": self.result.text},
            "cited": [{"n": c.n, "post_id": c.post_id, "topic_id": c.topic_id, "url": c.url,
                       "title": c.title} for c in self.result.citations],
            "removed": {**removed_counts(self.result),
                        "items": [{"kind": x.kind, "value": x.value, "reason": x.reason}
                                  for x in self.result.removed]},
            "evidence": r.evidence,
            "llm": self.llm,
            "model": self.model,
            "usage": {"prompt_tokens": self.usage.prompt_tokens,
                      "reply_tokens": self.usage.reply_tokens},
            "timings": {"first_token_ms": self.first_token_ms, "total_ms": self.total_ms},
            "trace": r.trace.as_list(),
        }
