"""Serve a host app from a background thread on a free port (tests, benchmarks).

Production uses gunicorn (``sidecar model-host``); this is werkzeug's threaded server, which
is enough to exercise the real HTTP path — sockets, keep-alive, concurrent request threads —
inside one process.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

from flask import Flask
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from models.host.app import close_host_app


class _QuietHandler(WSGIRequestHandler):
    # HTTP/1.1 keeps client connections open between requests, as gunicorn does.
    protocol_version = "HTTP/1.1"

    def log_request(self, *args: Any, **kwargs: Any) -> None:
        """No access log: benchmarks send thousands of requests."""


class ThreadedHost:
    """``with ThreadedHost(app) as host: ... host.url ...``; closes the app's batchers on exit."""

    def __init__(self, app: Flask, host: str = "127.0.0.1", port: int = 0) -> None:
        self.app = app
        self._server: BaseWSGIServer = make_server(
            host, port, app, threaded=True, request_handler=_QuietHandler
        )
        self._server.daemon_threads = True  # type: ignore[attr-defined]
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="model-host", daemon=True
        )

    @property
    def url(self) -> str:
        """Base URL, e.g. ``http://127.0.0.1:40123``."""
        return f"http://{self._server.host}:{self._server.server_port}"

    def start(self) -> ThreadedHost:
        """Start serving in the background."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and the app's batchers."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)
        close_host_app(self.app)

    def __enter__(self) -> ThreadedHost:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
