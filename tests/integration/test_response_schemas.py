"""Every documented answer of the main routes validates against its OpenAPI schema.

/v1/search, /v1/retrieve and /v1/health serialize through the pydantic models that document
them (``respond`` in sidecar/api/context.py), and those models forbid undeclared fields. Here
schemathesis checks real answers over the demo forum against the document the API publishes:
status, content type and body schema.
"""

from __future__ import annotations

from typing import Any

import pytest

from sidecar.api.schemas import HealthResponse, RetrieveResponse, SearchResponse
from tests.conftest import API_KEY

schemathesis = pytest.importorskip("schemathesis")
HEADERS = {"Authorization": f"Bearer {API_KEY}"}
ZFS = "How do I scrub a ZFS pool?"
# (path, method, body, headers): answers of every shape the routes give.
CASES: list[tuple[str, str, dict[str, Any] | None, dict[str, str]]] = [
    ("/v1/search", "POST", {"query": "ZFS scrub"}, HEADERS),
    ("/v1/search", "POST", {"query": "scrub", "details": ZFS, "mode": "keyword", "limit": 3},
     HEADERS),
    ("/v1/search", "POST", {"query": "zzqxv-nothing-matches"}, HEADERS),  # no results
    ("/v1/retrieve", "POST", {"messages": [{"role": "user", "content": ZFS}]}, HEADERS),
    ("/v1/retrieve", "POST", {"messages": [{"role": "user", "content": "thanks!"}]},
     HEADERS),  # stopped by the gate
    ("/v1/health", "GET", None, HEADERS),
    ("/v1/health", "GET", None, {}),  # the open answer, {"status": "ok"}
]
MAIN_ROUTES = {"/v1/search": SearchResponse, "/v1/retrieve": RetrieveResponse,
               "/v1/health": HealthResponse}


def test_every_answer_conforms_to_the_published_schema(demo_app: Any) -> None:
    from schemathesis.checks import (
        content_type_conformance,
        response_schema_conformance,
        status_code_conformance,
    )

    schema = schemathesis.openapi.from_wsgi("/v1/openapi.json", demo_app, headers=HEADERS)
    checks = [status_code_conformance, content_type_conformance, response_schema_conformance]
    for path, method, body, headers in CASES:
        operation = schema[path][method]
        case = operation.Case(body=body) if body is not None else operation.Case()
        response = case.call(headers=headers)
        assert response.status_code == 200, (path, response.text)
        case.validate_response(response, checks=checks, headers=headers)


def test_the_main_routes_document_their_answers(client: Any) -> None:
    spec = client.get("/v1/openapi.json", headers=HEADERS).json
    assert {path for path, *_ in CASES} == set(MAIN_ROUTES)
    for path, model in MAIN_ROUTES.items():
        [operation] = spec["paths"][path].values()
        ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
        schema = spec["components"]["schemas"][ref.rsplit("/", 1)[-1]]
        assert ref.endswith(model.__name__)
        # An undeclared field is a documentation bug: the schema says so, and so does the model.
        assert schema["additionalProperties"] is False


def test_an_answer_with_an_undeclared_field_does_not_leave(client: Any) -> None:
    from pydantic import ValidationError

    body = client.get("/v1/health").json
    assert body == {"status": "ok"}  # the open answer says nothing more, not even nulls
    with pytest.raises(ValidationError):
        HealthResponse.model_validate({**body, "debug": "internals"})
