"""HTTP plumbing of the remote models: requests, error classification, the cached ``/info``."""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

import httpx

from models.errors import TERMINAL_STATUSES, TRANSIENT_STATUSES, RemoteInputError, RemoteModelError

log = logging.getLogger(__name__)

# TEI's default --max-client-batch-size, used when /info does not say.
DEFAULT_CLIENT_BATCH = 32


def _error_message(response: httpx.Response) -> tuple[str, str | None]:
    """The message and TEI ``error_type`` of an error response, whatever its shape."""
    try:
        body = response.json()
    except ValueError:
        return (response.text.strip()[:300] or response.reason_phrase), None
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, str):  # TEI: {"error": "...", "error_type": "validation"}
            return error, body.get("error_type")
        if isinstance(error, dict):  # the sidecar's own API: {"error": {"code", "message"}}
            return str(error.get("message", error)), error.get("code")
        if "message" in body:  # OpenAI-style
            return str(body["message"]), body.get("type")
    return str(body)[:300], None


class RemoteModel:
    """HTTP plumbing shared by the remote embedder and reranker."""

    task: str = "embed"

    def __init__(
        self,
        url: str,
        name: str | None = None,
        timeout: float = 30.0,
        api_key: str | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"model host URL must start with http:// or https://, got {url!r}")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self._name = name
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=self.url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 5.0)),
            # One retry of a failed connect (e.g. a keep-alive socket the host just closed).
            transport=transport or httpx.HTTPTransport(retries=1),
        )
        self._info: dict[str, Any] | None = None
        self._lock = threading.Lock()

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """Send one request; returns the decoded JSON or raises a ``RemoteModelError``."""
        try:
            response = self._http.request(method, path, json=body)
        except httpx.TimeoutException:
            raise RemoteModelError(
                self.url, f"{method} {path} timed out after {self.timeout:g}s"
            ) from None
        except httpx.HTTPError as exc:
            raise RemoteModelError(self.url, f"cannot reach {method} {path}: {exc}") from exc
        if response.status_code >= 400:
            message, error_type = _error_message(response)
            status = response.status_code
            known = status in TERMINAL_STATUSES or status in TRANSIENT_STATUSES or status >= 500
            kind = RemoteModelError if known else RemoteInputError
            raise kind(self.url, f"{method} {path}: {message}", status=status,
                       error_type=error_type)  # fmt: skip
        try:
            return response.json()
        except ValueError:
            raise RemoteModelError(
                self.url, f"{method} {path} answered something that is not JSON",
                status=response.status_code,
            ) from None

    def info(self) -> dict[str, Any]:
        """What this client knows of its model, in the shape of TEI's ``/info`` (fetched once).

        ``model_id``, ``model_type``, ``max_input_length``, ``max_client_batch_size`` and, for
        an embedder, ``dimensions``, ``normalize`` and ``prompts``.
        """
        with self._lock:
            if self._info is None:
                section = self._describe()
                self._info = section
                self._check_name(str(section.get("model_id", "")))
            return self._info

    def _describe(self) -> dict[str, Any]:
        """``GET /info``. Our host may serve both models: its ``/info`` lists them under
        ``models``, and each client picks its own; a plain TEI server describes its one model at
        the top level."""
        data = self.request("GET", "/info")
        if not isinstance(data, dict):
            raise RemoteModelError(self.url, "GET /info did not return an object")
        section: dict[str, Any] = (data.get("models") or {}).get(self.task) or data
        expected = "embedding" if self.task == "embed" else "reranker"
        model_type = section.get("model_type") or {}
        if expected not in model_type:
            raise RemoteModelError(
                self.url, f"the host serves a {next(iter(model_type), 'unknown')} model, "
                f"not an {expected} model", status=424,
            )  # fmt: skip
        return section

    def _check_name(self, model_id: str) -> None:
        if self._name is None:
            return

        def canon(s: str) -> str:
            return re.sub(r"[^a-z0-9]", "", s.lower())

        if canon(self._name) not in canon(model_id):
            log.warning("%s serves %r, but this sidecar calls it %r: vectors are stored under "
                        "the name %r", self.url, model_id, self._name, self._name)  # fmt: skip

    @property
    def name(self) -> str:
        """The configured name, else the host's ``model_id``."""
        return self._name or str(self.info().get("model_id") or "remote")

    @property
    def provider(self) -> str:
        """Where the remote model runs ("cpu", "cuda"...; "remote" when the host does not say).

        Never raises: health pages read it while the host may be down.
        """
        try:
            return str(self.info().get("provider") or "remote")
        except RemoteModelError:
            return "remote"

    @property
    def max_length(self) -> int:
        """Maximum tokens per input, special tokens included (TEI's ``max_input_length``)."""
        return int(self.info()["max_input_length"])

    @property
    def client_batch(self) -> int:
        """Inputs per request (TEI's ``max_client_batch_size``)."""
        return max(1, int(self.info().get("max_client_batch_size") or DEFAULT_CLIENT_BATCH))

    def chunks(self, items: list[str]) -> list[tuple[int, list[str]]]:
        """``(offset, items)`` slices of at most :attr:`client_batch` items."""
        size = self.client_batch
        return [(i, items[i : i + size]) for i in range(0, len(items), size)]

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()
