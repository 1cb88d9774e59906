"""A small local HTTP server that speaks OpenAI's chat-completions API, for the answer's tests.

It follows the documented wire format that vLLM, llama.cpp's server and LM Studio also serve:
``POST /v1/chat/completions`` answers one ``chat.completion`` object, or (``"stream": true``)
Server-Sent Events of ``chat.completion.chunk`` objects (``choices[0].delta.content``), a chunk
with ``finish_reason``, a usage chunk when ``stream_options.include_usage`` is asked, and
``data: [DONE]``; ``GET /v1/models`` lists models. Errors are ``{"error": {"message", "type",
"code"}}`` with the status. With ``api_key`` set, a request without ``Authorization: Bearer
<key>`` is a 401. Replies, delays and errors are set per test; every request is recorded.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from sidecar.bench.llm_stub import LocalServer
from tests.answer.ollama_server import ChatGauge, RecordedRequest, Reply


@dataclass
class OpenAIBehaviour:
    """What the server does; tests change it between requests."""

    models: list[str] = field(default_factory=lambda: ["answer-model"])
    reply: Reply = "An answer."
    api_key: str | None = None
    delay_s: float = 0.0  # before the first byte
    status: int | None = None  # answer every chat with this error status
    chunk_chars: int = 4
    chunk_delay_s: float = 0.0


class OpenAIServer(LocalServer):
    """Runs in a thread on 127.0.0.1 and a free port; ``base_url`` ends in ``/v1``."""

    def __init__(self) -> None:
        self.behaviour = OpenAIBehaviour()
        self.requests: list[RecordedRequest] = []
        self.chats = ChatGauge()
        self._lock = threading.Lock()
        super().__init__(self._handler())

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``."""
        return f"{self.url}/v1"

    def chat_requests(self) -> list[dict[str, Any]]:
        """The bodies of the chat-completion requests, oldest first."""
        with self._lock:
            return [r.body or {} for r in self.requests if r.path.endswith("/chat/completions")]

    def reset(self) -> None:
        """Default behaviour, no recorded requests."""
        with self._lock:
            self.behaviour = OpenAIBehaviour()
            self.requests.clear()
            self.chats = ChatGauge()

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet tests
                return

            def _send_json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _error(self, status: int, message: str, kind: str) -> None:
                self._send_json(status, {"error": {"message": message, "type": kind,
                                                   "param": None, "code": None}})

            def _authorized(self) -> bool:
                key = server.behaviour.api_key
                if key is None or self.headers.get("Authorization") == f"Bearer {key}":
                    return True
                self._error(401, "Incorrect API key provided", "invalid_request_error")
                return False

            def do_GET(self) -> None:
                server._record(RecordedRequest("GET", self.path, None))
                if not self._authorized():
                    return
                if self.path == "/v1/models":
                    self._send_json(200, {"object": "list", "data": [
                        {"id": m, "object": "model", "created": 0, "owned_by": "test"}
                        for m in server.behaviour.models]})
                else:
                    self._error(404, "not found", "invalid_request_error")

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    body = json.loads(self.rfile.read(length) or b"null")
                except ValueError:
                    body = None
                server._record(RecordedRequest("POST", self.path, body))
                if not self._authorized():
                    return
                if self.path != "/v1/chat/completions":
                    self._error(404, "not found", "invalid_request_error")
                    return
                with server.chats.counting():
                    self._chat(body)

            def _chat(self, body: Any) -> None:
                b = server.behaviour
                if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                    self._error(400, "'messages' is a required property",
                                "invalid_request_error")
                    return
                if b.delay_s:
                    time.sleep(b.delay_s)
                if b.status is not None:
                    self._error(b.status, "the server failed", "server_error")
                    return
                model = body.get("model")
                if model not in b.models:
                    self._error(404, f"The model `{model}` does not exist.",
                                "invalid_request_error")
                    return
                text = b.reply(body["messages"]) if callable(b.reply) else b.reply
                ident = f"chatcmpl-{uuid.uuid4().hex[:12]}"
                usage = {"prompt_tokens": 42, "completion_tokens": max(1, len(text.split())),
                         "total_tokens": 42 + max(1, len(text.split()))}
                if not body.get("stream"):
                    self._send_json(200, {
                        "id": ident, "object": "chat.completion", "created": int(time.time()),
                        "model": model, "usage": usage,
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": text}}]})
                    return
                self._stream(ident, model, text, usage,
                             bool((body.get("stream_options") or {}).get("include_usage")))

            def _stream(self, ident: str, model: str, text: str, usage: dict[str, int],
                        with_usage: bool) -> None:
                b = server.behaviour
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

                def chunk(delta: dict[str, Any], finish: str | None = None,
                          choices: bool = True, extra: dict[str, Any] | None = None) -> None:
                    payload: dict[str, Any] = {
                        "id": ident, "object": "chat.completion.chunk",
                        "created": int(time.time()), "model": model,
                        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
                        if choices else [], **(extra or {})}
                    self._event(f"data: {json.dumps(payload)}\n\n")

                chunk({"role": "assistant", "content": ""})
                size = max(1, b.chunk_chars)
                for i in range(0, len(text), size):
                    if i and b.chunk_delay_s:
                        time.sleep(b.chunk_delay_s)
                    chunk({"content": text[i:i + size]})
                chunk({}, "stop")
                if with_usage:
                    chunk({}, choices=False, extra={"usage": usage})
                self._event("data: [DONE]\n\n")
                self.wfile.write(b"0\r\n\r\n")

            def _event(self, text: str) -> None:
                data = text.encode()
                try:
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()
                except OSError:
                    server.chats.client_left()
                    raise

        return Handler


@contextmanager
def running_openai() -> Iterator[OpenAIServer]:
    """An OpenAI-speaking server for the duration of a ``with`` block."""
    server = OpenAIServer().start()
    try:
        yield server
    finally:
        server.stop()
