"""Domain errors. The core raises them; the HTTP layer turns them into JSON in one place."""

from __future__ import annotations

from typing import Any


class SidecarError(Exception):
    """Base of every error the sidecar raises on purpose.

    ``status`` is the HTTP status the API answers with, ``code`` a stable machine-readable name.
    ``message`` and ``details`` go into the response; ``internal`` (a driver's message, with
    host, port or user) goes only to the log and the command line.
    """

    status: int = 500
    code: str = "internal_error"

    def __init__(self, message: str, *, details: Any = None, internal: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        self.internal = internal

    def __str__(self) -> str:
        return f"{self.message} ({self.internal})" if self.internal else self.message


class InvalidInput(SidecarError):
    """The request is well-formed JSON but says something we cannot accept."""

    status = 422
    code = "invalid_input"


class BadRequest(SidecarError):
    """The request cannot be read at all (not JSON, wrong content type)."""

    status = 400
    code = "bad_request"


class PayloadTooLarge(SidecarError):
    """The request body or one of its texts is over the limit."""

    status = 413
    code = "payload_too_large"


class Unauthorized(SidecarError):
    """Missing or wrong API key."""

    status = 401
    code = "unauthorized"


class NotFound(SidecarError):
    """The thing asked for does not exist (or is not public, which we do not distinguish)."""

    status = 404
    code = "not_found"


class Conflict(SidecarError):
    """The request conflicts with the current state (e.g. a model with other dimensions)."""

    status = 409
    code = "conflict"


class TooManyRequests(SidecarError):
    """Too many wrong keys from this client lately (:mod:`sidecar.moderation.throttle`), or too
    many answers at once; ``retry_after_s`` becomes the ``Retry-After`` header."""

    status = 429
    code = "too_many_requests"

    def __init__(self, message: str, *, retry_after_s: int | None = None,
                 details: Any = None) -> None:
        super().__init__(message, details=details)
        self.retry_after_s = retry_after_s


class ServiceUnavailable(SidecarError):
    """A dependency (database, model, queue) is not reachable right now."""

    status = 503
    code = "service_unavailable"


class LLMNotConfigured(ServiceUnavailable):
    """An answer was asked and no LLM is configured to write it."""

    code = "llm_not_configured"


class DatabaseTimeout(ServiceUnavailable):
    """A query hit its ``statement_timeout`` or ``lock_timeout`` (the forum's database is busy,
    or one of its tables is locked): the sidecar gave up instead of waiting."""

    code = "database_timeout"
    transient = True  # retried later it may well succeed (jobs.errors.classify reads this)


class ConfigurationError(SidecarError):
    """The sidecar cannot start with this configuration; the message says how to fix it."""

    status = 500
    code = "configuration_error"


class OwnerRequired(ConfigurationError):
    """The sidecar's role may not do this (build an index on a table another role owns): the
    owner must, and the message says how."""

    code = "owner_required"
