"""Property-based fuzzing of every documented route from the OpenAPI description.

Schemathesis generates requests (valid and invalid, per the schema) against the real app over
the demo forum (its own database: these routes write); whatever it sends, the answer must never
be a 5xx, and must be one the description documents: its status, its content type and its body's
schema. This is how a NUL character in a query was found to reach PostgreSQL (now a 400 for every
route).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic import SecretStr

from tests.conftest import API_KEY, demo_forum

schemathesis = pytest.importorskip("schemathesis")
HEADERS = {"Authorization": f"Bearer {API_KEY}"}
MODERATOR_KEY = "fuzz-85aa0a5eecca047264a19734514773cc"
# The moderation API takes the moderator's key, every other route the API key.
MODERATOR = {"Authorization": f"Bearer {MODERATOR_KEY}"}
EXAMPLES = 15  # per operation: about 250 requests in all


@pytest.fixture(scope="module")
def fuzz_app(tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str, redis_url: str,
             minilm: Any) -> Iterator[Any]:
    """The app over the demo forum embedded with MiniLM, moderation on (with its own key), and
    an LLM (a local server speaking Ollama's API), so that its routes are fuzzed past the
    "disabled" and "not configured" answers."""
    from sidecar.api.app import create_app
    from tests.answer.ollama_server import running_ollama

    with running_ollama() as llm, demo_forum(
            pg_admin_url, redis_url, tmp_path_factory.mktemp("fuzz"), minilm, prefix="t_fuzz",
            moderator_key=SecretStr(MODERATOR_KEY), ollama_url=llm.url,
            queue_prefix=f"fuzz{uuid.uuid4().hex[:6]}") as res:
        llm.behaviour.reply = "Scrub it [[1]], see http://evil.example [[7]]."
        yield create_app(res.settings, res)


def test_every_answer_is_documented_and_none_is_a_server_error(fuzz_app: Any) -> None:
    from schemathesis.checks import (
        content_type_conformance,
        not_a_server_error,
        response_schema_conformance,
        status_code_conformance,
    )

    schema = schemathesis.openapi.from_wsgi("/v1/openapi.json", fuzz_app, headers=HEADERS)
    operations = [result.ok() for result in schema.get_all_operations()]
    documented = {f"{method.upper()} {path}" for path, ops in schema.raw_schema["paths"].items()
                  for method in ops}
    # Every documented route is fuzzed, but the document itself (schemathesis leaves it out).
    assert {op.label for op in operations} == documented - {"GET /v1/openapi.json"}
    assert len(operations) >= 15
    checks = [not_a_server_error, status_code_conformance, content_type_conformance,
              response_schema_conformance]
    failures: list[str] = []
    for operation in operations:
        headers = MODERATOR if operation.path.startswith("/v1/moderation/") else HEADERS
        fuzz(operation, headers, checks, failures)
    assert not failures, "\n".join(failures)


def fuzz(operation: Any, headers: dict[str, str], checks: list[Any], failures: list[str]) -> None:
    """Send generated requests to one operation; collect every answer that breaks a check."""

    @given(case=operation.as_strategy())
    @settings(max_examples=EXAMPLES, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case: Any) -> None:
        response = case.call(headers=headers)
        try:
            case.validate_response(response, checks=checks, headers=headers)
        except (AssertionError, BaseExceptionGroup) as exc:  # schemathesis' FailureGroup
            failures.append(f"{operation.method.upper()} {case.formatted_path} -> "
                            f"{response.status_code} {response.text[:200]}: "
                            f"{str(exc)[:400]}")

    check()
