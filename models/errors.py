"""Exceptions raised by the models package.

The HTTP layer maps :class:`ModelInputError` to a 4xx response; :class:`ModelLoadError` is meant to
abort start-up, so its message always carries the offending path and the reason.
"""

from __future__ import annotations

from pathlib import Path


class ModelError(Exception):
    """Base class of every error raised by the models package."""


class ModelLoadError(ModelError):
    """A model (manifest, tokenizer or ONNX graph) could not be loaded.

    The message always has the form ``"cannot load model at <path>: <reason>"`` so that an operator
    reading a failed start-up log knows which file to look at.
    """

    def __init__(self, path: str | Path, reason: str) -> None:
        self.path = str(path)
        self.reason = reason
        super().__init__(f"cannot load model at {self.path}: {reason}")


class ModelInputError(ModelError, ValueError):
    """The caller passed inputs the model cannot take (empty list, empty text, wrong type)."""


# Statuses that mean "this host will keep refusing us until someone fixes the configuration"
# (bad key, wrong URL): a backfill should pause instead of retrying.
TERMINAL_STATUSES = frozenset({401, 403, 404, 405})
# Statuses worth retrying later: timeouts, overload, TEI's 424 backend failure, server errors.
TRANSIENT_STATUSES = frozenset({408, 424, 429})


class RemoteModelError(ModelError):
    """A remote (TEI-compatible) model host failed to answer.

    ``status`` is the HTTP status, or ``None`` when no response came back (connection refused,
    timeout). ``terminal`` and ``transient`` classify the failure the way discourse-ai's
    provider health does: a terminal failure (401/403, or 404/405: wrong URL) will not heal by
    itself; a transient one (no response, 408, 424, 429, 5xx) is worth retrying later.
    """

    def __init__(
        self, url: str, message: str, *, status: int | None = None, error_type: str | None = None
    ) -> None:
        self.url = url
        self.status = status
        self.error_type = error_type
        self.detail = message
        where = f"model host {url}"
        super().__init__(f"{where}: HTTP {status}: {message}" if status else f"{where}: {message}")

    @property
    def terminal(self) -> bool:
        """True when retrying cannot help until the configuration changes."""
        return self.status in TERMINAL_STATUSES

    @property
    def transient(self) -> bool:
        """True when the same request may succeed later."""
        return self.status is None or self.status in TRANSIENT_STATUSES or self.status >= 500


class RemoteInputError(RemoteModelError, ModelInputError):
    """The host refused the inputs themselves (400, 413, 422): retrying them cannot help."""
