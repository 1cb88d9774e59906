"""Limits and batching knobs of the model host."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class HostConfig:
    """How the model host batches and what it accepts.

    The defaults match the sidecar's ``SIDECAR_MODEL_HOST_*`` settings;
    :meth:`from_settings` reads them from a settings object without importing the sidecar.
    """

    max_batch: int = 64
    """Texts (or pairs) per model call."""
    max_wait_ms: float = 5.0
    """How long a batch waits for concurrent requests to join it."""
    max_inputs: int = 512
    """Inputs per request (TEI's ``max_client_batch_size``)."""
    max_input_chars: int = 100_000
    """Characters per text; longer texts are cut when truncating, refused (413) otherwise."""
    max_queue: int = 8192
    """Items waiting for the model before requests are refused with 429."""
    max_request_bytes: int = 16 * 1024 * 1024
    tokenize_slots: int = 4
    """``/tokenize`` requests of ``max_input_chars`` characters that may run at once; the
    characters being tokenized are capped at this many times ``max_input_chars`` (429 over it),
    as the batcher's queue caps the other routes."""
    request_timeout_s: float = 120.0
    """How long a request waits for its results before answering 503."""
    api_key: str | None = None
    """When set, every route but /health and /metrics needs ``Authorization: Bearer <key>``."""

    def __post_init__(self) -> None:
        for name in ("max_batch", "max_inputs", "max_input_chars", "max_queue",
                     "max_request_bytes", "tokenize_slots"):  # fmt: skip
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.max_wait_ms < 0 or self.request_timeout_s <= 0:
            raise ValueError("max_wait_ms must be >= 0 and request_timeout_s > 0")
        if self.max_queue < self.max_batch:
            raise ValueError("max_queue must be >= max_batch")

    @classmethod
    def from_settings(cls, settings: Any) -> HostConfig:
        """Build from an object with the sidecar's ``model_host_*`` attributes."""
        key: Any = getattr(settings, "model_host_api_key", None)
        secret = key.get_secret_value() if hasattr(key, "get_secret_value") else key
        max_batch = int(settings.model_host_max_batch)
        max_inputs = int(settings.model_host_max_inputs)
        return cls(
            max_batch=max_batch,
            max_wait_ms=float(settings.model_host_max_wait_ms),
            max_inputs=max_inputs,
            max_input_chars=int(settings.model_host_max_input_chars),
            max_queue=max(cls.max_queue, 8 * max_inputs, max_batch),
            request_timeout_s=max(float(getattr(settings, "model_timeout_s", 30.0)) * 4, 60.0),
            api_key=secret or None,
        )
