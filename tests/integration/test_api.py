"""The HTTP API over the demo forum: auth, validation, errors, health, OpenAPI, metrics."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import API_KEY

SEARCH = "/v1/search"


def test_every_v1_route_needs_the_key(client: Any) -> None:
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "Basic abc"}):
        resp = client.post(SEARCH, json={"query": "zfs"}, headers=headers)
        assert resp.status_code == 401
        assert resp.json["error"]["code"] == "unauthorized"
    assert client.get("/v1/openapi.json").status_code == 401
    assert client.get("/v1/unknown-route").status_code == 401  # nothing leaks without the key


def test_the_bearer_scheme_is_case_insensitive(client: Any) -> None:
    for scheme in ("Bearer", "bearer", "BEARER"):  # RFC 7235 §2.1
        resp = client.post(SEARCH, json={"query": "zfs"},
                           headers={"Authorization": f"{scheme} {API_KEY}"})
        assert resp.status_code == 200, scheme


def test_health_and_ready_are_open_and_metrics_need_the_key(client: Any,
                                                            auth: dict[str, str]) -> None:
    health = client.get("/v1/health")
    assert health.status_code == 200 and health.json == {"status": "ok"}
    body = client.get("/v1/health", headers=auth).json
    assert body["status"] == "ok"
    assert body["models"]["embedder"]["dimensions"] == 384
    assert body["models"]["embedder"]["provider"] == "cpu"
    assert body["pgvector"] >= "0.7"
    ready = client.get("/v1/ready")
    assert ready.status_code == 200 and ready.json["checks"] == {"database": True, "redis": True}
    # /metrics names the models, the backfill's state and the database's connections, which
    # /v1/health says only to the key: Prometheus scrapes it with the key.
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers=auth).status_code == 200


@pytest.mark.parametrize(
    ("body", "status", "code"),
    [
        (b"{not json", 400, "bad_request"),
        (b"", 400, "bad_request"),
        (b"[1, 2]", 422, "invalid_input"),
        (b'"just a string"', 422, "invalid_input"),
        (b'{"limit": 5}', 422, "invalid_input"),
        (b'{"query": 42}', 422, "invalid_input"),
        (b'{"query": ""}', 422, "invalid_input"),
        (b'{"query": "   "}', 422, "invalid_input"),
        (b'{"query": "zfs", "limit": 0}', 422, "invalid_input"),
        (b'{"query": "zfs", "limit": 51}', 422, "invalid_input"),
        (b'{"query": "zfs", "limit": "5"}', 422, "invalid_input"),
        (b'{"query": "zfs", "limit": 2.5}', 422, "invalid_input"),
        (b'{"query": "zfs", "mode": "fuzzy"}', 422, "invalid_input"),
        (b'{"query": "zfs", "strategy": 9}', 422, "invalid_input"),
        (b'{"query": "zfs", "limt": 5}', 422, "invalid_input"),
        (b'{"query": null}', 422, "invalid_input"),
    ],
)
def test_bad_input_gets_a_clear_json_4xx(
    client: Any, auth: dict[str, str], body: bytes, status: int, code: str
) -> None:
    resp = client.post(SEARCH, data=body, headers={**auth, "Content-Type": "application/json"})
    assert resp.status_code == status, resp.json
    assert resp.json["error"]["code"] == code
    assert resp.json["error"]["message"]


def test_an_oversized_query_is_refused_with_its_length(client: Any, auth: dict[str, str]) -> None:
    resp = client.post(SEARCH, json={"query": "zfs " * 600}, headers=auth)
    assert resp.status_code == 422
    assert "2000" in resp.json["error"]["message"]


def test_an_oversized_body_is_a_413(client: Any, auth: dict[str, str]) -> None:
    resp = client.post(SEARCH, data=b'{"query": "' + b"a" * 400_000 + b'"}',
                       headers={**auth, "Content-Type": "application/json"})
    assert resp.status_code == 413
    assert resp.json["error"]["code"] == "request_entity_too_large"


def test_wrong_method_and_unknown_route_are_json(client: Any, auth: dict[str, str]) -> None:
    assert client.get(SEARCH, headers=auth).status_code == 405
    missing = client.get("/v1/nothing-here", headers=auth)
    assert missing.status_code == 404 and missing.json["error"]["code"] == "not_found"


def test_openapi_describes_search(client: Any, auth: dict[str, str]) -> None:
    spec = client.get("/v1/openapi.json", headers=auth).json
    assert spec["openapi"].startswith("3.1")
    op = spec["paths"]["/v1/search"]["post"]
    schema_ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    name = schema_ref.rsplit("/", 1)[-1]
    props = spec["components"]["schemas"][name]["properties"]
    assert {"query", "limit", "mode"} <= set(props)
    assert props["limit"]["maximum"] == 50
    assert op["security"] == [{"bearer": []}]
    assert "/v1/health" in spec["paths"]


def test_metrics_count_requests_and_stage_latency(client: Any, auth: dict[str, str]) -> None:
    client.post(SEARCH, json={"query": "ZFS scrub"}, headers=auth)
    text = client.get("/metrics", headers=auth).get_data(as_text=True)
    assert 'sidecar_http_requests_total{route="/v1/search",status="200"}' in text
    assert 'sidecar_stage_seconds_count{status="done",step="semantic"}' in text


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/v1/search", b'{"query": "zfs\\u0000pool"}'),
        ("/v1/retrieve", b'{"messages": [{"role": "user", "content": "zfs\\u0000 pool?"}]}'),
        ("/v1/sanitize", b'{"retrieval_id": "00000000-0000-0000-0000-000000000000",'
                         b' "text": "a\\u0000b"}'),
        ("/v1/index/events", b'{"event": "post_edited\\u0000", "ids": [1]}'),
    ],
)
def test_nul_characters_are_a_400_not_a_500(
    client: Any, auth: dict[str, str], path: str, body: bytes
) -> None:
    # PostgreSQL cannot store NUL in text or jsonb: refused up front, for every route.
    resp = client.post(path, data=body, headers={**auth, "Content-Type": "application/json"})
    assert resp.status_code == 400, resp.json
    assert "NUL" in resp.json["error"]["message"]


def test_an_escaped_backslash_u0000_is_ordinary_text(client: Any, auth: dict[str, str]) -> None:
    resp = client.post("/v1/search", data=b'{"query": "printf \\\\u0000 zfs"}',
                       headers={**auth, "Content-Type": "application/json"})
    assert resp.status_code == 200


def test_nul_in_a_query_string_or_a_form_is_a_400(client: Any, auth: dict[str, str]) -> None:
    assert client.get("/v1/admin/backfill?run=%00", headers=auth).status_code == 400
    form = client.post("/moderation/login", data={"key": "a\x00b"})
    assert form.status_code == 400
