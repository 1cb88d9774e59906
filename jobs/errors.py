"""Which failures are the model provider's, and which of those retrying cannot fix.

The remote embedder (``models.client``) raises ``RemoteModelError`` carrying ``status``,
``terminal`` and ``transient``: 401/403 (and 404/405, a wrong URL) are terminal, a host that does
not answer, 408/424/429 and 5xx are transient. Classification reads those attributes, so the jobs
do not depend on one client class (``httpx`` transport errors also count as transient).
"""

from __future__ import annotations

from enum import StrEnum

import httpx

from models.errors import ModelInputError


class Failure(StrEnum):
    """How a batch failure counts."""

    TERMINAL = "terminal"  # retrying will not help: counts towards pausing the run
    TRANSIENT = "transient"  # the provider is down or busy: retry with backoff
    OTHER = "other"  # not the provider's (database, a bug): retry, then the batch fails


def classify(exc: BaseException) -> Failure:
    """Classify an exception raised while embedding a batch."""
    if isinstance(exc, ModelInputError):
        # The inputs were refused (400/413/422 from a host, or locally): a batch problem, not
        # the provider's; it fails once its retries are spent.
        return Failure.OTHER
    if getattr(exc, "terminal", None) is True:
        return Failure.TERMINAL
    if getattr(exc, "transient", None) is True or getattr(exc, "terminal", None) is False:
        return Failure.TRANSIENT
    if isinstance(exc, httpx.TransportError | TimeoutError | ConnectionError):
        return Failure.TRANSIENT
    return Failure.OTHER


def describe(exc: BaseException) -> str:
    """One line for the run record and the status: class, HTTP status if any, message."""
    status = getattr(exc, "status", None)
    head = type(exc).__name__ + (f" (HTTP {status})" if status is not None else "")
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{head}: {message}"[:500] if message else head
