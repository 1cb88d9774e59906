"""A local server that speaks Ollama's ``POST /api/chat``, for ``sidecar bench --part answer``.

It follows Ollama's wire format (its docs/api.md): one JSON object when the body says
``"stream": false``, else NDJSON chunks (HTTP chunked encoding) ending with a ``"done": true``
chunk that carries the token counts. The reply is fixed; it comes at once, or streamed in pieces
at a fixed rate, so what the sidecar adds can be told from what the LLM takes. The stub notes
its own time to first token per request (from the request read to the first chunk sent).

The wire helpers are shared with the tests' fuller Ollama server (tests/answer/ollama_server.py).
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from io import BufferedIOBase
from typing import Any, Self


class QuietServer(ThreadingHTTPServer):
    """A threaded server that does not print a client's broken pipe (it left: expected)."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up is not news."""
        return


def now_iso() -> str:
    """Ollama's ``created_at``: UTC, with a ``Z``."""
    return datetime.now(UTC).isoformat().replace("+00:00", "Z")


def chat_stats(text: str) -> dict[str, int]:
    """The counts and durations Ollama adds to a finished reply (tokens ~ words here)."""
    tokens = max(1, len(text.split()))
    return {"total_duration": 1_000_000, "load_duration": 100_000, "prompt_eval_count": 42,
            "prompt_eval_duration": 200_000, "eval_count": tokens, "eval_duration": 500_000}


def chat_whole(model: str, text: str) -> dict[str, Any]:
    """The body of a non-streamed ``/api/chat`` reply."""
    return {"model": model, "created_at": now_iso(),
            "message": {"role": "assistant", "content": text},
            "done": True, "done_reason": "stop", **chat_stats(text)}


def chat_piece(model: str, piece: str) -> dict[str, Any]:
    """One streamed chunk of text."""
    return {"model": model, "created_at": now_iso(),
            "message": {"role": "assistant", "content": piece}, "done": False}


def chat_done(model: str, text: str) -> dict[str, Any]:
    """The stream's last chunk: no text, the counts of the whole reply."""
    return {**chat_whole(model, ""), **chat_stats(text)}


def pieces(text: str, size: int) -> list[str]:
    """The reply cut in pieces of ``size`` characters (a token is ~4)."""
    size = max(1, size)
    return [text[i:i + size] for i in range(0, len(text), size)]


def write_chunk(out: BufferedIOBase, payload: dict[str, Any]) -> None:
    """One NDJSON line as one HTTP chunk, flushed (raises OSError when the client left)."""
    data = json.dumps(payload).encode() + b"\n"
    out.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
    out.flush()


def end_chunks(out: BufferedIOBase) -> None:
    """The chunked body's terminator."""
    out.write(b"0\r\n\r\n")


class LocalServer:
    """An HTTP server on 127.0.0.1 and a free port, served by a thread; ``url`` is its address.

    Also a context manager (started on entry, stopped on exit)."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]) -> None:
        self._httpd = QuietServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> Self:
        """Serve in the background."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and free the port."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class OllamaStub(LocalServer):
    """``/api/chat``, answering ``reply`` to every chat.

    ``first_delay_s``: before the first chunk (a streamed reply) or the whole reply;
    ``chunk_delay_s``: between two chunks of ``chunk_chars`` characters.
    """

    def __init__(self, reply: str, *, first_delay_s: float = 0.0, chunk_delay_s: float = 0.0,
                 chunk_chars: int = 16) -> None:
        self.reply = reply
        self.first_delay_s = first_delay_s
        self.chunk_delay_s = chunk_delay_s
        self.chunk_chars = chunk_chars
        self.first_token_ms: list[float] = []  # per chat request, as the stub saw it
        self._lock = threading.Lock()
        super().__init__(self._handler())

    def _noted(self, started: float) -> None:
        with self._lock:
            self.first_token_ms.append((time.perf_counter() - started) * 1000)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                return

            def do_POST(self) -> None:
                started = time.perf_counter()
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path != "/api/chat":
                    self._json(404, {"error": "404 page not found"})
                    return
                body = json.loads(raw or b"{}")
                model = str(body.get("model") or "")
                if stub.first_delay_s:
                    time.sleep(stub.first_delay_s)
                if body.get("stream", True) is False:
                    self._json(200, chat_whole(model, stub.reply))
                    stub._noted(started)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for i, piece in enumerate(pieces(stub.reply, stub.chunk_chars)):
                    if i and stub.chunk_delay_s:
                        time.sleep(stub.chunk_delay_s)
                    write_chunk(self.wfile, chat_piece(model, piece))
                    if i == 0:
                        stub._noted(started)
                write_chunk(self.wfile, chat_done(model, stub.reply))
                end_chunks(self.wfile)

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json; charset=utf-8")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
