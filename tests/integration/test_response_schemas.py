"""Every documented answer of every JSON route validates against its OpenAPI schema.

Every route serializes through the pydantic models that document it (``respond`` in
sidecar/api/context.py), errors included, and those models forbid undeclared fields. Here
schemathesis checks real answers over the demo forum against the document the API publishes:
status, content type and body schema; the scenario at the end gives every documented 2xx answer
of every JSON route at least once (the fuzz test, tests/fuzz, covers the error answers).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from sidecar.api.schemas import HealthResponse, RetrieveResponse, SearchResponse
from tests.conftest import API_KEY, demo_forum
from tests.helpers import discourse_delivery

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


# --- Every JSON route, on a forum of its own (these routes write) ------------------------------
MODERATOR_KEY = "conformance-d739d045559a58d8200d14ab7740ec41"
WEBHOOK_SECRET = "conformance-webhook-secret-0001"
MODERATOR = {"Authorization": f"Bearer {MODERATOR_KEY}"}
# Documented answers no scenario here can give: /v1/ready's 503 needs a database that is down
# (tests/integration/test_db_restart.py).
NOT_EXERCISED = {("/v1/ready", "get", "503")}


@pytest.fixture(scope="module")
def forum_app(tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str, redis_url: str,
              minilm: Any) -> Iterator[Any]:
    """The app over the demo forum embedded with MiniLM, moderation and webhooks on, answers
    written by a local server that speaks Ollama's API."""
    from sidecar.api.app import create_app
    from tests.answer.ollama_server import running_ollama

    with running_ollama() as llm, demo_forum(
            pg_admin_url, redis_url, tmp_path_factory.mktemp("conformance"), minilm,
            prefix="t_conf", moderator_key=SecretStr(MODERATOR_KEY), ollama_url=llm.url,
            discourse_webhook_secret=SecretStr(WEBHOOK_SECRET),
            queue_prefix=f"conf{uuid.uuid4().hex[:6]}") as res:
        llm.behaviour.reply = "Run a scrub [[1]], see http://evil.example [[9]]."
        yield create_app(res.settings, res)


class Conformance:
    """Calls the app and checks every answer against the operation it documents."""

    def __init__(self, app: Any) -> None:
        from schemathesis.checks import (
            content_type_conformance,
            not_a_server_error,
            response_schema_conformance,
            status_code_conformance,
        )

        self.client = app.test_client()
        self.schema = schemathesis.openapi.from_wsgi("/v1/openapi.json", app, headers=HEADERS)
        self.checks = [not_a_server_error, status_code_conformance, content_type_conformance,
                       response_schema_conformance]
        self.seen: set[tuple[str, str, str]] = set()

    def call(self, method: str, template: str, status: int, *, json: Any = None,
             headers: dict[str, str] = HEADERS, data: bytes | None = None,
             query: dict[str, Any] | None = None, **path: Any) -> Any:
        url = template.format(**path)
        response = self.client.open(url, method=method, json=json, data=data, headers=headers,
                                    query_string=query)
        assert response.status_code == status, (method, url, response.get_data(as_text=True))
        operation = self.schema[template][method]
        case = operation.Case(path_parameters=path or None)
        case.validate_response(response, checks=self.checks, headers=headers)
        self.seen.add((template, method.lower(), str(status)))
        return response.json

    def documented_answers(self) -> set[tuple[str, str, str]]:
        """Every (path, method, status) with a JSON answer other than an error."""
        spec = self.client.get("/v1/openapi.json", headers=HEADERS).json
        return {(path, method, status) for path, ops in spec["paths"].items()
                for method, op in ops.items() for status, answer in op["responses"].items()
                if path != "/metrics" and not answer["content"]["application/json"]["schema"][
                    "$ref"].endswith("/ErrorResponse")}


def deliver(api: Conformance, event: str, body: dict[str, Any], event_id: int,
            status: int) -> Any:
    raw, headers = discourse_delivery(event, body, WEBHOOK_SECRET, event_id)
    return api.call("POST", "/v1/discourse/webhook", status, data=raw, headers=headers)


def test_every_documented_answer_of_every_json_route_validates(forum_app: Any) -> None:
    api = Conformance(forum_app)
    api.call("GET", "/v1/health", 200)
    api.call("GET", "/v1/ready", 200)
    api.call("GET", "/v1/openapi.json", 200)
    api.call("POST", "/v1/search", 200, json={"query": "ZFS scrub"})
    api.call("GET", "/v1/topics/{topic_id}/related", 200, topic_id=9, query={"limit": 3})
    api.call("POST", "/v1/similar", 200, json={"title": "ZFS scrub", "raw": ZFS})
    answered = api.call("POST", "/v1/retrieve", 200,
                        json={"messages": [{"role": "user", "content": ZFS}]})
    post_id, topic_id = answered["evidence"][0]["post_id"], answered["evidence"][0]["topic_id"]
    gated = api.call("POST", "/v1/retrieve", 200,
                     json={"messages": [{"role": "user", "content": "thanks!"}]})
    off_topic = api.call("POST", "/v1/retrieve", 200, json={"messages": [
        {"role": "user", "content": "Which wine goes best with a Neapolitan pizza?"}]})
    sanitized = api.call("POST", "/v1/sanitize", 200, json={
        "retrieval_id": answered["retrieval_id"], "text": "Run a scrub [[1]] <b>now</b> [[9]]."})
    assert sanitized["citations"] and {r["kind"] for r in sanitized["removed"]} >= {"html"}
    answer = api.call("POST", "/v1/answer", 200,
                      json={"messages": [{"role": "user", "content": ZFS}]})
    assert answer["outcome"] == "answered" and answer["cited"]

    api.call("POST", "/v1/index/events", 202, json={"event": "post_edited", "ids": [post_id]})
    deliver(api, "ping", {"ping": "OK"}, 1, 200)
    deliver(api, "post_edited", {"post": {"id": post_id}}, 2, 202)
    deliver(api, "post_edited", {"post": {"id": post_id}}, 2, 200)  # a redelivery
    deliver(api, "user_created", {"user": {"id": 1}}, 3, 200)  # concerns no post

    run = api.call("POST", "/v1/admin/backfill", 202, json={"budget": 10})["run"]
    api.call("GET", "/v1/admin/backfill", 200)
    status = api.call("GET", "/v1/admin/backfill", 200, query={"run": run["id"]})
    assert status["runs"][0]["id"] == run["id"]
    for action in ("pause", "resume", "stop"):
        template = "/v1/admin/backfill/{run_id}/{action}"
        api.call("POST", template, 200, run_id=run["id"], action=action)

    listed = api.call("GET", "/v1/moderation/retrievals", 200, headers=MODERATOR)
    assert gated["retrieval_id"] in {item["id"] for item in listed["items"]}
    detail = "/v1/moderation/retrievals/{retrieval_id}"
    api.call("GET", detail, 200, headers=MODERATOR, retrieval_id=gated["retrieval_id"])
    api.call("POST", detail + "/label", 200, headers=MODERATOR,
             json={"label": "correct_abstention"}, retrieval_id=gated["retrieval_id"])
    api.call("POST", detail + "/label", 200, headers=MODERATOR,
             json={"label": "should_have_answered", "right_topic_id": topic_id},
             retrieval_id=off_topic["retrieval_id"])
    api.call("GET", "/v1/moderation/calibration", 200, headers=MODERATOR)
    asked = api.call("GET", "/v1/moderation/retrievals", 200, headers=MODERATOR,
                     query={"outcome": "answered"})
    (item,) = [i for i in asked["items"] if i["id"] == answer["retrieval_id"]]
    assert item["answers"][0]["outcome"] == "answered" and item["answers"][0]["cited"]
    gaps = api.call("GET", "/v1/moderation/gaps", 200, headers=MODERATOR, query={"days": 1})
    assert off_topic["retrieval_id"] in {q["retrieval_id"] for g in gaps["groups"]
                                         for q in g["examples"]}

    assert api.documented_answers() - api.seen == NOT_EXERCISED
