"""A per-request trace: every stage says what it did, how long it took, and whether it failed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["done", "skipped", "error"]


@dataclass
class TraceStep:
    """One stage of the pipeline: ``{step, status, ms, detail}`` in responses."""

    step: str
    status: Status
    ms: float
    detail: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"step": self.step, "status": self.status, "ms": round(self.ms, 2),
                "detail": self.detail}


class StepFailed(Exception):
    """Raised inside ``Trace.step`` by code that wants the step marked as an error."""


@dataclass
class Trace:
    """The ordered steps of one request."""

    steps: list[TraceStep] = field(default_factory=list)

    @contextmanager
    def step(self, name: str, *, swallow: bool = False) -> Iterator[dict[str, Any]]:
        """Time a stage; the yielded dict becomes its detail.

        An exception marks the step ``error`` with its message; it propagates unless ``swallow``
        is set, for the stages that must degrade instead of failing the request.
        """
        detail: dict[str, Any] = {}
        start = time.perf_counter()
        try:
            yield detail
        except Exception as exc:
            detail.setdefault("error", f"{type(exc).__name__}: {exc}")
            self.steps.append(TraceStep(name, "error", _ms(start), detail))
            if not swallow:
                raise
        else:
            status: Status = "skipped" if detail.get("skipped") else "done"
            detail.pop("skipped", None)
            self.steps.append(TraceStep(name, status, _ms(start), detail))

    def skip(self, name: str, reason: str, **detail: Any) -> None:
        """Record a stage that did not run, and why."""
        self.steps.append(TraceStep(name, "skipped", 0.0, {"reason": reason, **detail}))

    def get(self, name: str) -> TraceStep | None:
        """The last step of that name, if any."""
        for step in reversed(self.steps):
            if step.step == name:
                return step
        return None

    def as_list(self) -> list[dict[str, Any]]:
        """JSON form."""
        return [s.as_dict() for s in self.steps]


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0
