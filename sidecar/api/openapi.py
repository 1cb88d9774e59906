"""An OpenAPI 3.1 description read from the app itself.

A route states its path and methods once, to Flask: the description walks the app's ``url_map``
(rule, methods, endpoint, the converter of each path parameter) and joins each view with what
``@documented`` says about it (summary, tag, the pydantic models of its query string, body and
answers). The models are the ones the route validates with (``parse_body``, ``parse_query``) and
answers through (``respond``), so the description cannot drift from the code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from flask import Flask
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema
from werkzeug.routing import Rule
from werkzeug.routing.converters import (
    AnyConverter,
    BaseConverter,
    FloatConverter,
    NumberConverter,
    UUIDConverter,
)

from sidecar.api.schemas import ErrorResponse

F = TypeVar("F", bound=Callable[..., Any])

# The errors of a route with a bearer key and a JSON body: a NUL character (400), no or a wrong
# key (401), a body over SIDECAR_MAX_REQUEST_BYTES (413), a body the model refuses (422).
BODY_ERRORS = (400, 401, 413, 422)


@dataclass(frozen=True)
class RouteDoc:
    """What the description says about a view, beyond what its Flask rule says."""

    summary: str
    tag: str
    request: type[BaseModel] | None = None
    query: type[BaseModel] | None = None  # the model that validates the query string
    response: type[BaseModel] | None = None
    status: int = 200
    also: tuple[int, ...] = ()  # other statuses answered with the same model (a 503, a 200)
    auth: str | None = "bearer"  # "bearer", "moderator", "discourse" or None
    content_type: str = "application/json"
    errors: tuple[int, ...] = BODY_ERRORS
    streams: bool = False  # on request, the 200 is Server-Sent Events (text/event-stream)


_DOCS: dict[Callable[..., Any], RouteDoc] = {}
# <converter(args):name> or <name> in a Flask rule (werkzeug's own syntax).
_RULE_VARIABLE = re.compile(r"<(?:[a-zA-Z_][a-zA-Z0-9_]*(?:\([^)]*\))?:)?([a-zA-Z_][a-zA-Z0-9_]*)>")
_IGNORED_METHODS = frozenset({"HEAD", "OPTIONS"})


def documented(**kwargs: Any) -> Callable[[F], F]:
    """Decorator recording what the description says about a view (see :class:`RouteDoc`)."""
    doc = RouteDoc(**kwargs)

    def wrap(fn: F) -> F:
        _DOCS[fn] = doc
        return fn

    return wrap


def route_doc(view: Callable[..., Any]) -> RouteDoc | None:
    """The documentation of a view, or None for a view left out of the description."""
    return _DOCS.get(view)


@dataclass(frozen=True)
class Operation:
    """One documented (path, method) of the app."""

    rule: Rule
    method: str
    doc: RouteDoc

    @property
    def path(self) -> str:
        """The OpenAPI path: ``<int:run_id>`` becomes ``{run_id}``."""
        return _RULE_VARIABLE.sub(r"{\1}", self.rule.rule)


def operations(app: Flask) -> Iterator[Operation]:
    """Every documented (rule, method) of the app, in the url_map's order."""
    for rule in app.url_map.iter_rules():
        doc = route_doc(app.view_functions[rule.endpoint])
        if doc is None:
            continue
        for method in sorted((rule.methods or set()) - _IGNORED_METHODS):
            yield Operation(rule, method.lower(), doc)


def converter_schema(converter: BaseConverter) -> dict[str, Any]:
    """The JSON schema of what a path converter accepts (``int`` -> integer, ``any`` -> enum)."""
    if isinstance(converter, NumberConverter):
        schema: dict[str, Any] = {
            "type": "number" if isinstance(converter, FloatConverter) else "integer"}
        minimum = converter.min if converter.min is not None else (
            None if converter.signed else 0)
        if minimum is not None:
            schema["minimum"] = minimum
        if converter.max is not None:
            schema["maximum"] = converter.max
        return schema
    if isinstance(converter, AnyConverter):
        return {"type": "string", "enum": sorted(converter.items)}
    if isinstance(converter, UUIDConverter):
        return {"type": "string", "format": "uuid"}
    return {"type": "string", "minLength": 1}


def _path_parameters(rule: Rule) -> list[dict[str, Any]]:
    # werkzeug keeps each variable's converter on the rule; it has no public accessor.
    converters: dict[str, BaseConverter] = rule._converters
    return [{"name": name, "in": "path", "required": True,
             "schema": converter_schema(converters[name])}
            for name in _RULE_VARIABLE.findall(rule.rule)]


def _without_null(schema: dict[str, Any]) -> dict[str, Any]:
    # An optional query parameter is absent, never null: ``int | None`` documents an integer.
    options = schema.get("anyOf")
    if not options or {"type": "null"} not in options:
        return schema
    rest = [o for o in options if o != {"type": "null"}]
    out = {k: v for k, v in schema.items() if k not in ("anyOf", "default")}
    return {**out, **rest[0]} if len(rest) == 1 else {**out, "anyOf": rest}


def _query_parameters(schema: dict[str, Any]) -> list[dict[str, Any]]:
    required = set(schema.get("required", ()))
    params = []
    for name, prop in schema.get("properties", {}).items():
        prop = _without_null(dict(prop))
        param: dict[str, Any] = {"name": name, "in": "query", "required": name in required,
                                 "schema": {k: v for k, v in prop.items()
                                            if k not in ("title", "description")}}
        if "description" in prop:
            param["description"] = prop["description"]
        params.append(param)
    return params


def _models(ops: list[Operation]) -> list[tuple[type[BaseModel], JsonSchemaMode]]:
    # Bodies and query strings are what the model accepts, answers what it sends.
    wanted: set[tuple[type[BaseModel], JsonSchemaMode]] = {(ErrorResponse, "serialization")}
    for op in ops:
        wanted.update((m, "validation") for m in (op.doc.request, op.doc.query) if m)
        if op.doc.response is not None:
            wanted.add((op.doc.response, "serialization"))
    return sorted(wanted, key=lambda pair: (pair[0].__name__, pair[1]))


def build_spec(app: Flask, title: str, version: str) -> dict[str, Any]:
    """The whole OpenAPI document of ``app``."""
    ops = sorted(operations(app), key=lambda op: (op.path, op.method))
    refs, schema = models_json_schema(_models(ops), ref_template="#/components/schemas/{model}")
    components: dict[str, Any] = schema.get("$defs", {})

    def body(model: type[BaseModel] | None, content_type: str) -> dict[str, Any]:
        if model is None:
            return {content_type: {"schema": {"type": "string"}}}
        return {content_type: {"schema": refs[(model, "serialization")]}}

    error = {"description": "Error", "content": body(ErrorResponse, "application/json")}
    paths: dict[str, dict[str, Any]] = {}
    for op in ops:
        doc = op.doc
        spec: dict[str, Any] = {"summary": doc.summary, "tags": [doc.tag],
                                "operationId": f"{op.method}_{op.path}".replace("/", "_")}
        if doc.auth:
            spec["security"] = [{doc.auth: []}]
        if doc.request is not None:
            spec["requestBody"] = {"required": True, "content": {
                "application/json": {"schema": refs[(doc.request, "validation")]}}}
        parameters = _path_parameters(op.rule)
        if doc.query is not None:
            ref = refs[(doc.query, "validation")]["$ref"].rsplit("/", 1)[-1]
            parameters += _query_parameters(components[ref])
        if parameters:
            spec["parameters"] = parameters
        content = body(doc.response, doc.content_type)
        if doc.streams:  # each event: its name, and its data (a JSON text)
            content["text/event-stream"] = {"schema": {
                "type": "object", "required": ["event", "data"],
                "properties": {"event": {"type": "string"}, "data": {"type": "string"}}}}
        ok = {"description": "OK", "content": content}
        responses = {str(status): ok for status in (doc.status, *doc.also)}
        errors = doc.errors
        if doc.auth == "bearer" and 401 in errors:
            # too many wrong keys from this client (sidecar.moderation.throttle)
            errors = (*errors, 429)
        responses.update({str(status): error for status in errors})
        spec["responses"] = dict(sorted(responses.items()))
        paths.setdefault(op.path, {})[op.method] = spec
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
