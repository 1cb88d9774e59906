"""The OpenAPI description is read from the routes themselves.

A route states its path and methods once, to Flask: the description lists every rule of the
app's url_map (but the HTML pages below), with the type of each path parameter from its Flask
converter and the query parameters from the pydantic model that validates them.
"""

from __future__ import annotations

import re
from typing import Any

from sidecar.api.openapi import route_doc
from sidecar.api.routes_admin import BackfillQuery
from sidecar.moderation.models import ReviewFilters
from tests.conftest import API_KEY

HEADERS = {"Authorization": f"Bearer {API_KEY}"}
# Left out of the description on purpose: Flask's static files, the moderators' HTML pages
# (a login form, a session cookie, CSRF tokens: not an API; docs/moderation.md describes them)
# and the MCP endpoint (JSON-RPC, one URL for every method: docs/mcp.md describes it).
UNDOCUMENTED = {
    "static", "mcp.mcp", "mcp.mcp_stream",
    "moderation.pages.login", "moderation.pages.login_post", "moderation.pages.logout",
    "moderation.pages.review", "moderation.pages.detail", "moderation.pages.label",
    "moderation.pages.calibration", "moderation.pages.gaps",
}
_IGNORED = {"HEAD", "OPTIONS"}


def _openapi_path(rule: Any) -> str:
    # /v1/admin/backfill/<int(max=...):run_id>/<any(...):action> -> .../{run_id}/{action}
    return re.sub(r"<(?:[^<>]*:)?(\w+)>", r"{\1}", rule.rule)


def test_every_route_is_documented_but_the_html_pages(demo_app: Any) -> None:
    rules = list(demo_app.url_map.iter_rules())
    undocumented = {r.endpoint for r in rules if route_doc(demo_app.view_functions[r.endpoint])
                    is None}
    assert undocumented == UNDOCUMENTED


def test_paths_and_methods_are_the_url_maps(demo_app: Any) -> None:
    spec = demo_app.test_client().get("/v1/openapi.json", headers=HEADERS).json
    expected = {
        (_openapi_path(rule), method.lower())
        for rule in demo_app.url_map.iter_rules() if rule.endpoint not in UNDOCUMENTED
        for method in (rule.methods or set()) - _IGNORED
    }
    documented = {(path, method) for path, ops in spec["paths"].items() for method in ops}
    assert documented == expected
    assert ("/v1/admin/backfill/{run_id}/{action}", "post") in documented
    assert len(documented) >= 16


def _parameters(spec: dict[str, Any], path: str, method: str) -> dict[str, dict[str, Any]]:
    return {p["name"]: p for p in spec["paths"][path][method].get("parameters", [])}


def test_path_parameters_have_their_converters_type(client: Any) -> None:
    spec = client.get("/v1/openapi.json", headers=HEADERS).json
    params = _parameters(spec, "/v1/admin/backfill/{run_id}/{action}", "post")
    assert params["run_id"]["in"] == "path" and params["run_id"]["required"] is True
    assert params["run_id"]["schema"] == {"type": "integer", "minimum": 0,
                                          "maximum": 2**63 - 1}
    assert params["action"]["schema"] == {"type": "string",
                                          "enum": ["pause", "resume", "stop"]}
    # A plain <retrieval_id> is any non-empty segment (a non-UUID one is a 404).
    detail = _parameters(spec, "/v1/moderation/retrievals/{retrieval_id}", "get")
    assert detail["retrieval_id"]["schema"] == {"type": "string", "minLength": 1}


def test_query_parameters_are_the_validating_models_fields(client: Any) -> None:
    spec = client.get("/v1/openapi.json", headers=HEADERS).json
    backfill = _parameters(spec, "/v1/admin/backfill", "get")
    assert set(backfill) == set(BackfillQuery.model_fields) == {"run", "limit"}
    assert backfill["run"]["schema"]["type"] == "integer"  # optional: absent, never null
    assert backfill["limit"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 100,
                                           "default": 10}
    assert all(p["in"] == "query" and p["required"] is False for p in backfill.values())
    review = _parameters(spec, "/v1/moderation/retrievals", "get")
    aliases = {f.alias or name for name, f in ReviewFilters.model_fields.items()}
    assert set(review) == aliases >= {"zone", "from", "to", "q", "page", "per_page"}
    assert review["zone"]["schema"] == {"type": "string",
                                        "enum": ["abstain", "cautious", "normal"]}
    assert review["outcome"]["schema"] == {
        "type": "string", "enum": ["answered", "no_answer", "abstained", "failed", "cancelled"]}
    gaps = _parameters(spec, "/v1/moderation/gaps", "get")
    assert set(gaps) == {"days", "examples"}
    assert gaps["days"]["schema"] == {"type": "integer", "minimum": 1, "maximum": 365,
                                      "default": 30}
    assert review["from"]["schema"] == {"type": "string", "format": "date"}
    assert review["from"]["description"].startswith("first day")


def test_every_json_answer_has_a_schema_that_forbids_undeclared_fields(client: Any) -> None:
    spec = client.get("/v1/openapi.json", headers=HEADERS).json
    schemas = spec["components"]["schemas"]
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            for status, answer in op["responses"].items():
                content = answer["content"]
                if "application/json" not in content:
                    assert (path, status) == ("/metrics", "200")
                    continue
                name = content["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]
                assert schemas[name]["additionalProperties"] is False, (method, path, status)
