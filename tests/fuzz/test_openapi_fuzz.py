"""Property-based fuzzing of every documented route from the OpenAPI description.

Schemathesis generates requests (valid and invalid, per the schema) against the real app over
the demo forum; whatever it sends, the answer must never be a 5xx. This is how a NUL character
in a query was found to reach PostgreSQL (now a 400 for every route).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from pydantic import SecretStr

from tests.conftest import API_KEY

schemathesis = pytest.importorskip("schemathesis")
HEADERS = {"Authorization": f"Bearer {API_KEY}"}


def test_no_route_answers_a_server_error(demo_state: Any) -> None:
    if type(demo_state.embedder).__name__ == "RemoteEmbedder":
        pytest.skip("fuzzed once, with the in-process model")
    from sidecar.api import create_app

    # Moderation on (with its own key), so its routes are fuzzed past the "disabled" answer.
    config = demo_state.settings.model_copy(update={"moderator_key": SecretStr("fuzz-mod-key")})
    app = create_app(config, dataclasses.replace(demo_state, settings=config))
    schema = schemathesis.openapi.from_wsgi("/v1/openapi.json", app, headers=HEADERS)
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 12  # every documented route is fuzzed
    failures: list[str] = []
    for operation in operations:
        fuzz(operation, failures)
    assert not failures, failures


def fuzz(operation: Any, failures: list[str]) -> None:
    """Send generated requests to one operation; collect every 5xx."""

    @given(case=operation.as_strategy())
    @settings(max_examples=20, deadline=None, database=None,
              suppress_health_check=list(HealthCheck))
    def check(case: Any) -> None:
        response = case.call(headers=HEADERS)
        if response.status_code >= 500:
            failures.append(f"{operation.method.upper()} {case.formatted_path}: "
                            f"{response.status_code} {response.text[:200]}")

    check()
