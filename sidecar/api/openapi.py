"""An OpenAPI 3.1 description assembled from the routes' pydantic models."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from sidecar.api.schemas import ErrorResponse

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class RouteDoc:
    """What the description says about one operation."""

    path: str
    method: str
    summary: str
    tag: str
    request: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    status: int = 200
    auth: str | None = "bearer"  # "bearer", "moderator", "discourse" or None
    content_type: str = "application/json"
    errors: tuple[int, ...] = (400, 401, 413, 422)
    query: tuple[tuple[str, str, str], ...] = field(default=())  # (name, type, description)


ROUTES: list[RouteDoc] = []
_PATH_PARAM = re.compile(r"\{(\w+)\}")


def documented(**kwargs: Any) -> Callable[[F], F]:
    """Decorator recording a route's documentation next to its code."""

    def wrap(fn: F) -> F:
        ROUTES.append(RouteDoc(**kwargs))
        return fn

    return wrap


def build_spec(title: str, version: str) -> dict[str, Any]:
    """The whole OpenAPI document."""
    models: set[type[BaseModel]] = {ErrorResponse}
    for route in ROUTES:
        models.update(m for m in (route.request, route.response) if m is not None)
    ordered = sorted(models, key=lambda m: m.__name__)
    refs, schema = models_json_schema(
        [(m, "validation") for m in ordered], ref_template="#/components/schemas/{model}"
    )
    components = schema.get("$defs", {})

    def ref(model: type[BaseModel]) -> dict[str, Any]:
        return refs[(model, "validation")]

    paths: dict[str, dict[str, Any]] = {}
    for route in sorted(ROUTES, key=lambda r: (r.path, r.method)):
        op: dict[str, Any] = {"summary": route.summary, "tags": [route.tag],
                              "operationId": f"{route.method}_{route.path}".replace("/", "_")}
        if route.auth:
            op["security"] = [{route.auth: []}]
        if route.request is not None:
            op["requestBody"] = {"required": True, "content": {
                "application/json": {"schema": ref(route.request)}}}
        # Path parameters come from the path itself: /v1/x/{retrieval_id} documents retrieval_id.
        parameters: list[dict[str, Any]] = [
            {"name": n, "in": "path", "required": True, "schema": {"type": "string"}}
            for n in _PATH_PARAM.findall(route.path)
        ]
        parameters += [
            {"name": n, "in": "query", "required": False, "schema": {"type": t},
             "description": d} for n, t, d in route.query
        ]
        if parameters:
            op["parameters"] = parameters
        ok: dict[str, Any] = {"description": "OK"}
        if route.response is not None:
            ok["content"] = {route.content_type: {"schema": ref(route.response)}}
        elif route.content_type != "application/json":
            ok["content"] = {route.content_type: {"schema": {"type": "string"}}}
        responses: dict[str, Any] = {str(route.status): ok}
        for status in route.errors if route.auth or route.request else ():
            responses[str(status)] = {"description": "Error", "content": {
                "application/json": {"schema": ref(ErrorResponse)}}}
        op["responses"] = responses
        paths.setdefault(route.path, {})[route.method] = op
    return {
        "openapi": "3.1.0",
        "info": {"title": title, "version": version},
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer",
                           "description": "SIDECAR_API_KEY"},
                "moderator": {"type": "http", "scheme": "bearer",
                              "description": "SIDECAR_MODERATOR_KEY"},
                "discourse": {"type": "apiKey", "in": "header",
                              "name": "X-Discourse-Event-Signature",
                              "description": "sha256=<hex HMAC-SHA256 of the raw body with "
                                             "SIDECAR_DISCOURSE_WEBHOOK_SECRET>"},
            },
        },
    }
