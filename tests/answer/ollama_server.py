"""A small local HTTP server that speaks Ollama's API, for tests that must not need a real Ollama.

It follows Ollama's documented wire format (docs/api.md): ``POST /api/chat`` answers one JSON
object (``"stream": false``) or NDJSON chunks ending with a ``"done": true`` chunk (streamed, the
default when ``stream`` is absent); ``POST /api/embed`` answers ``{"model", "embeddings"}`` for
the embedding models a test serves (vectors from a real ONNX model); ``GET /api/tags`` lists
models; ``POST /api/show`` describes one; ``GET /api/version``. Errors are ``{"error": "..."}``
with Ollama's status codes (404 ``model 'x' not found``, 400 for a malformed body, 500...).
Replies, delays and errors are set per test; every request is recorded.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from sidecar.bench.llm_stub import (
    LocalServer,
    chat_done,
    chat_piece,
    chat_whole,
    end_chunks,
    now_iso,
    pieces,
    write_chunk,
)

Reply = str | Callable[[list[dict[str, Any]]], str]
# An embedding model: texts -> float32 rows (e.g. the bound ``embed`` of an ONNX embedder).
EmbedFn = Callable[[list[str]], Any]


@dataclass
class OllamaBehaviour:
    """What the server does; tests change it between requests."""

    models: list[str] = field(default_factory=lambda: ["qwen3:30b-a3b"])
    reply: Reply = "standalone query"
    delay_s: float = 0.0  # before the first byte of a chat reply
    status: int | None = None  # answer every chat with this error status
    error: str = "internal error"
    stream_error: str | None = None  # an {"error": ...} line in the middle of a stream
    chunk_chars: int = 4  # streamed replies come in pieces of this size
    chunk_delay_s: float = 0.0  # between two streamed pieces (a fixed generation rate)
    embedders: dict[str, EmbedFn] = field(default_factory=dict)  # name -> texts to vectors
    context_length: int = 256  # what /api/show says of the embedding models


@dataclass
class RecordedRequest:
    """One request as received."""

    method: str
    path: str
    body: dict[str, Any] | None


class ChatGauge:
    """Chat requests in flight now, the most at once, and streams whose client left."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.most = 0
        self.left = 0

    @contextmanager
    def counting(self) -> Iterator[None]:
        """Count one request while it is served."""
        with self._lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            yield
        finally:
            with self._lock:
                self.now -= 1

    def client_left(self) -> None:
        """A write failed: the client closed the connection mid-stream."""
        with self._lock:
            self.left += 1


class OllamaServer(LocalServer):
    """Runs in a thread on 127.0.0.1 and a free port; ``url`` is its address."""

    def __init__(self) -> None:
        self.behaviour = OllamaBehaviour()
        self.requests: list[RecordedRequest] = []
        self.chats = ChatGauge()
        self._lock = threading.Lock()
        super().__init__(self._handler())

    @property
    def chat_calls(self) -> int:
        """How many ``/api/chat`` requests arrived."""
        with self._lock:
            return sum(1 for r in self.requests if r.path == "/api/chat")

    def embed_requests(self) -> list[dict[str, Any]]:
        """The bodies of the ``/api/embed`` requests, oldest first."""
        with self._lock:
            return [r.body or {} for r in self.requests if r.path == "/api/embed"]

    def chat_requests(self) -> list[dict[str, Any]]:
        """The bodies of the ``/api/chat`` requests, oldest first."""
        with self._lock:
            return [r.body or {} for r in self.requests if r.path == "/api/chat"]

    def reset(self) -> None:
        """Default behaviour, no recorded requests."""
        with self._lock:
            self.behaviour = OllamaBehaviour()
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
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> dict[str, Any] | None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                if not raw:
                    return None
                try:
                    value = json.loads(raw)
                except ValueError:
                    return {"__invalid__": raw.decode("utf-8", "replace")}
                return value if isinstance(value, dict) else {"__invalid__": value}

            def do_GET(self) -> None:
                server._record(RecordedRequest("GET", self.path, None))
                if self.path == "/api/tags":
                    names = [*server.behaviour.models, *server.behaviour.embedders]
                    self._send_json(200, {"models": [_model_entry(m) for m in names]})
                elif self.path == "/api/version":
                    self._send_json(200, {"version": "0.12.6"})
                elif self.path == "/":
                    data = b"Ollama is running"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/plain; charset=utf-8")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                else:
                    self._send_json(404, {"error": "404 page not found"})

            def do_POST(self) -> None:
                body = self._body()
                server._record(RecordedRequest("POST", self.path, body))
                if self.path == "/api/show":
                    self._show(body)
                elif self.path == "/api/chat":
                    with server.chats.counting():
                        self._chat(body)
                elif self.path == "/api/embed":
                    self._embed(body)
                else:
                    self._send_json(404, {"error": "404 page not found"})

            def _show(self, body: dict[str, Any] | None) -> None:
                name = (body or {}).get("model") or (body or {}).get("name")
                if name in server.behaviour.embedders:
                    size = server.behaviour.context_length
                    self._send_json(200, {
                        "modelfile": f"FROM {name}", "parameters": "", "template": "",
                        "details": {**_details(), "family": "bert", "families": ["bert"]},
                        "model_info": {"general.architecture": "bert",
                                       "bert.context_length": size,
                                       "bert.embedding_length": 384},
                        "capabilities": ["embedding"], "modified_at": now_iso(),
                    })
                    return
                if name not in server.behaviour.models:
                    self._send_json(404, {"error": f"model '{name}' not found"})
                    return
                self._send_json(200, {
                    "modelfile": f"FROM {name}", "parameters": "", "template": "{{ .Prompt }}",
                    "details": _details(), "model_info": {"general.architecture": "qwen3moe"},
                    "capabilities": ["completion", "thinking"],
                    "modified_at": now_iso(),
                })

            def _embed(self, body: dict[str, Any] | None) -> None:
                b = server.behaviour
                if body is None or "__invalid__" in body:
                    self._send_json(400, {"error": "invalid request body"})
                    return
                model, given = body.get("model"), body.get("input")
                if not model:
                    self._send_json(400, {"error": "model is required"})
                    return
                if b.status is not None:
                    self._send_json(b.status, {"error": b.error})
                    return
                if model in b.models:
                    self._send_json(400, {"error": f'"{model}" does not support embeddings'})
                    return
                if model not in b.embedders:
                    self._send_json(404, {"error": f'model "{model}" not found, try pulling '
                                                   "it first"})
                    return
                texts = [given] if isinstance(given, str) else given
                if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                    self._send_json(400, {"error": "invalid input type"})
                    return
                if b.delay_s:
                    time.sleep(b.delay_s)
                # Ollama cuts each input at num_ctx tokens (truncate defaults to true); the ONNX
                # model behind cuts at its own window, the same thing for these tests.
                rows = b.embedders[model](texts) if texts else []
                self._send_json(200, {"model": model,
                                      "embeddings": [[float(x) for x in r] for r in rows],
                                      "total_duration": 1_000_000, "load_duration": 10_000,
                                      "prompt_eval_count": sum(len(t.split()) for t in texts)})

            def _chat(self, body: dict[str, Any] | None) -> None:
                b = server.behaviour
                if body is None or "__invalid__" in body:
                    self._send_json(400, {"error": "invalid request body"})
                    return
                model = body.get("model")
                if not model:
                    self._send_json(400, {"error": "model is required"})
                    return
                messages = body.get("messages") or []
                if not isinstance(messages, list) or not all(
                        isinstance(m, dict) and "role" in m for m in messages):
                    self._send_json(400, {"error": "invalid message format"})
                    return
                if b.delay_s:
                    time.sleep(b.delay_s)
                if b.status is not None:
                    self._send_json(b.status, {"error": b.error})
                    return
                if model not in b.models:
                    self._send_json(404, {"error": f"model '{model}' not found"})
                    return
                text = b.reply(messages) if callable(b.reply) else b.reply
                if body.get("stream", True) is False:
                    self._send_json(200, chat_whole(model, text))
                    return
                self._stream(model, text)

            def _stream(self, model: str, text: str) -> None:
                b = server.behaviour
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                parts = pieces(text, b.chunk_chars)
                for i, piece in enumerate(parts):
                    if i and b.chunk_delay_s:
                        time.sleep(b.chunk_delay_s)
                    if b.stream_error is not None and i == len(parts) // 2:
                        self._chunk({"error": b.stream_error})
                        break
                    self._chunk(chat_piece(model, piece))
                else:
                    self._chunk(chat_done(model, text))
                end_chunks(self.wfile)

            def _chunk(self, payload: dict[str, Any]) -> None:
                try:
                    write_chunk(self.wfile, payload)
                except OSError:  # the client left: what a real server sees, counted
                    server.chats.client_left()
                    raise

        return Handler


def _details() -> dict[str, Any]:
    return {"parent_model": "", "format": "gguf", "family": "qwen3moe",
            "families": ["qwen3moe"], "parameter_size": "30.5B", "quantization_level": "Q4_K_M"}


def _model_entry(name: str) -> dict[str, Any]:
    return {"name": name, "model": name, "modified_at": now_iso(), "size": 18_556_688_736,
            "digest": "0" * 64, "details": _details()}


@contextmanager
def running_ollama() -> Iterator[OllamaServer]:
    """An Ollama-speaking server for the duration of a ``with`` block."""
    server = OllamaServer().start()
    try:
        yield server
    finally:
        server.stop()
