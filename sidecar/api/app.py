"""The Flask app factory."""

from __future__ import annotations

import logging
import re

from flask import Flask, request

from sidecar.api import (
    proxy,
    routes_admin,
    routes_answer,
    routes_discourse,
    routes_health,
    routes_index,
    routes_mcp,
    routes_moderation,
    routes_related,
    routes_retrieve,
    routes_sanitize,
    routes_search,
)
from sidecar.api.auth import ApiKeyGuard, install_guard
from sidecar.api.context import init_app
from sidecar.api.errors import register_error_handlers
from sidecar.config.keys import key_problem
from sidecar.config.networks import parse_networks
from sidecar.config.settings import Settings, load_settings
from sidecar.errors import BadRequest, ConfigurationError
from sidecar.runtime.resources import Resources, start_resources

log = logging.getLogger(__name__)

# Routes that answer without the API key (load balancers call them; Discourse signs its webhook
# deliveries with their own secret instead).
# /metrics is not among them: it says what /v1/health says only to the key (models, backfill
# state, the database's connections), so Prometheus scrapes it with the key.
PUBLIC_ENDPOINTS = frozenset({"health.health", "health.ready", "static",
                              "discourse.discourse_webhook"})
# Routes with their own body limit (SIDECAR_DISCOURSE_WEBHOOK_MAX_BYTES).
WEBHOOK_ENDPOINTS = frozenset({"discourse.discourse_webhook"})
# Blueprints that protect themselves with another key (the moderator pages).
SELF_AUTHENTICATED_PREFIXES = ("moderation.",)
# A JSON \u0000 escape that is not itself escaped (preceded by an even number of backslashes).
_JSON_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")


def reject_nul_characters() -> None:
    """Refuse text with NUL characters, which PostgreSQL cannot store (a 500 otherwise).

    Checked once for every route: query strings, then forms or raw (JSON) bodies.
    """
    values = list(request.args.values())
    if request.mimetype in ("application/x-www-form-urlencoded", "multipart/form-data"):
        values += request.form.values()  # read the form first: get_data() would consume it
    elif _JSON_NUL.search(request.get_data(cache=True) or b""):
        values.append("\x00")
    if any("\x00" in value for value in values):
        raise BadRequest("text must not contain NUL characters (\\u0000)")


def create_app(settings: Settings | None = None, res: Resources | None = None) -> Flask:
    """Build the app. Resources are attached here, at start-up, never at import time.

    Tests pass ready-made resources ``res`` (e.g. with a dummy embedder); production starts them
    from the settings, which starts or joins the database and Redis and loads the models. The app
    never migrates (each gunicorn worker builds one): it checks that ``sidecar db upgrade`` ran.
    """
    settings = settings or (res.settings if res else load_settings())
    if settings.api_key is None:
        raise ConfigurationError(
            "SIDECAR_API_KEY is not set: every /v1 route needs a key "
            "(`make run` generates one for the embedded mode)"
        )
    api_key = settings.api_key.get_secret_value()
    # Settings copied with another key skip the validators: the keys are checked again here.
    for name, key in (("SIDECAR_API_KEY", settings.api_key),
                      ("SIDECAR_MODERATOR_KEY", settings.moderator_key)):
        problem = key_problem(key.get_secret_value()) if key is not None else None
        if problem is not None:
            raise ConfigurationError(f"{name}: {problem}")
    if res is None:
        res = start_resources(settings, migrate=False, purpose="api")
        # A serving process keeps this node's keyword index in sync (and builds it if missing);
        # with several workers one does the work, the others skip the round and read.
        res.search.keyword.start(settings.keyword_sync_s)

    app = Flask("sidecar")
    # The client address (throttling, logs) and scheme as the trusted proxies report them, and
    # only they: from any other peer the forwarded headers are dropped.
    proxy.install(app, settings.proxy_hops, parse_networks(settings.trusted_proxies))
    app.config["MAX_CONTENT_LENGTH"] = settings.max_request_bytes
    app.json.sort_keys = False  # type: ignore[attr-defined]
    init_app(app, res)
    register_error_handlers(app)
    guard = ApiKeyGuard(api_key, res.redis, settings.queue_prefix)
    install_guard(app, guard)

    @app.before_request
    def _body_limit() -> None:
        # Before anything reads a body: a webhook delivery carries a whole post (raw + cooked).
        if request.endpoint in WEBHOOK_ENDPOINTS:
            request.max_content_length = settings.discourse_webhook_max_bytes

    @app.before_request
    def _authenticate() -> None:
        endpoint = request.endpoint or ""
        if endpoint in PUBLIC_ENDPOINTS or endpoint.startswith(SELF_AUTHENTICATED_PREFIXES):
            return
        # Unknown URLs are authenticated too, so probing reveals nothing without the key.
        guard.require()

    app.before_request(reject_nul_characters)

    for module in (routes_health, routes_search, routes_related, routes_retrieve,
                   routes_answer, routes_sanitize, routes_index, routes_discourse, routes_admin,
                   routes_moderation, routes_mcp):
        app.register_blueprint(module.bp)
    return app
