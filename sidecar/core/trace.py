"""A per-request trace: every stage says what it did, how long it took, and whether it failed.

A trace is answered to the caller and stored with the retrieval, so a failure's text (which may
name files, hosts and internal URLs) stays in the log: the step's ``error`` becomes a short code
(the exception's class, or a reason the stage gave such as ``timeout`` or ``error:http_503``)
and ``error_ref``, which the log line of the full text carries too. In the process, the step
keeps the text (``TraceStep.detail``) for tests and metrics.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

log = logging.getLogger(__name__)

Status = Literal["done", "skipped", "error"]
# What an error code may look like: a word, no spaces, no path or URL characters.
_CODE = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]{0,63}$")


@dataclass
class TraceStep:
    """One stage of the pipeline: ``{step, status, ms, detail}`` in responses."""

    step: str
    status: Status
    ms: float
    detail: dict[str, Any] = field(default_factory=dict)
    error_code: str | None = None  # what the JSON form says in place of ``detail["error"]``
    error_ref: str | None = None  # the log line with the full text

    def as_dict(self) -> dict[str, Any]:
        """JSON form (an error's text replaced by its code and log reference)."""
        detail = self.detail
        if "error" in detail:
            detail = {**detail, "error": self.error_code or "failed",
                      "error_ref": self.error_ref}
        return {"step": self.step, "status": self.status, "ms": round(self.ms, 2),
                "detail": detail}


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
            self.steps.append(_logged(TraceStep(name, "error", _ms(start), detail), exc))
            if not swallow:
                raise
        else:
            status: Status = "skipped" if detail.get("skipped") else "done"
            detail.pop("skipped", None)
            self.steps.append(_logged(TraceStep(name, status, _ms(start), detail), None))

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


def error_code(exc: BaseException | None, text: str) -> str:
    """A short, stable code for a failure: the class of the exception behind it, or the
    reason a stage raised ``StepFailed`` with when that reads as a code."""
    cause = exc.__cause__ if isinstance(exc, StepFailed) and exc.__cause__ else exc
    if cause is not None and not isinstance(cause, StepFailed):
        return type(cause).__name__
    reason = str(cause) if cause is not None else text
    return reason if _CODE.match(reason) else "failed"


def _logged(step: TraceStep, exc: BaseException | None) -> TraceStep:
    """Log a failed step's text under a reference, and give the step its code."""
    text = step.detail.get("error")
    if text is None:
        return step
    step.error_code = error_code(exc, str(text))
    step.error_ref = secrets.token_hex(4)
    log.warning("trace step %s failed [%s] (%s): %s", step.step, step.error_ref,
                step.error_code, text)
    return step


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0
