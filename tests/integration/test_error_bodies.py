"""Error bodies carry no internals: the detail goes to the log under a request id the body names.

``/v1/health`` without the key says only that the process is up (no file paths, no load errors);
a 503 never carries the driver's message (host, port, user); every response names its request
id in ``X-Request-Id``, and a 5xx body names it too, so an operator finds the log line.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from flask import Flask

from sidecar.api.errors import register_error_handlers
from sidecar.db.pool import Database
from tests.conftest import API_KEY

AUTH = {"Authorization": f"Bearer {API_KEY}"}
# Nothing listens on port 1; the user name is a canary that must stay in the log.
DEAD_URL = "postgresql://canary_user:canary_pw@127.0.0.1:1/canary_db?connect_timeout=2"


def test_health_without_the_key_is_a_short_status(client: Any) -> None:
    body = client.get("/v1/health").json
    assert body == {"status": "ok"}
    full = client.get("/v1/health", headers=AUTH).json
    assert full["status"] == "ok" and full["models"]["embedder"]["dimensions"] == 384
    assert "version" in full and "pgvector" in full


def test_a_broken_reranker_is_detailed_only_behind_the_key(
    tmp_path: Path, db_url: str, redis_url: str, minilm: Any
) -> None:
    from sidecar.api.app import create_app
    from sidecar.runtime.resources import start_resources
    from tests.conftest import make_settings

    broken = tmp_path / "no-such-cross-encoder"
    settings = make_settings(tmp_path, db_url, redis_url, rerank_model_path=broken)
    res = start_resources(settings, embedder=minilm)
    try:
        http = create_app(settings, res).test_client()
        open_body = http.get("/v1/health").get_data(as_text=True)
        assert str(broken) not in open_body and "error" not in open_body
        detailed = http.get("/v1/health", headers=AUTH).json
        assert str(broken) in detailed["models"]["reranker"]["error"]
    finally:
        res.close()


def _app_with_dead_database() -> Flask:
    db = Database(DEAD_URL, min_size=0, max_size=1)
    app = Flask("t")
    register_error_handlers(app)

    @app.get("/read")
    def read() -> str:
        with db.connection(timeout=3.0) as conn:
            conn.execute("SELECT 1")
        return "unreachable"

    db.pool.open(wait=False)
    app.extensions["db"] = db
    return app


def test_a_503_names_a_request_id_and_leaves_the_driver_message_to_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    app = _app_with_dead_database()
    try:
        with caplog.at_level(logging.ERROR):
            resp = app.test_client().get("/read")
    finally:
        app.extensions["db"].close()
    assert resp.status_code == 503
    body = resp.get_data(as_text=True)
    for secret in ("canary_user", "canary_pw", "canary_db", "127.0.0.1", "port", "psycopg"):
        assert secret not in body
    error = resp.json["error"]
    assert error["code"] == "service_unavailable"
    assert error["request_id"] == resp.headers["X-Request-Id"]
    logged = [r.getMessage() for r in caplog.records if error["request_id"] in r.getMessage()]
    assert logged and any("127.0.0.1" in line for line in logged), logged  # the detail


def test_every_response_names_its_request_id(client: Any) -> None:
    ok = client.get("/v1/ready")
    bad = client.post("/v1/search", data=b"{", headers=AUTH)
    ids = {ok.headers["X-Request-Id"], bad.headers["X-Request-Id"]}
    assert len(ids) == 2 and all(len(i) >= 16 for i in ids)
    # A request id set by the proxy in front is kept (so both logs agree), if it looks like one.
    tagged = client.get("/v1/ready", headers={"X-Request-Id": "edge-1234abcd"})
    assert tagged.headers["X-Request-Id"] == "edge-1234abcd"
    forged = client.get("/v1/ready", headers={"X-Request-Id": "x ERROR forged log line"})
    assert forged.headers["X-Request-Id"] != "x ERROR forged log line"
