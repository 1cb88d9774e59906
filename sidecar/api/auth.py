"""Bearer-token authentication for the /v1 API (the shared parser of :mod:`models.web.auth`)."""

from __future__ import annotations

from models.web.auth import request_bearer, token_matches
from sidecar.config.settings import Settings
from sidecar.errors import Unauthorized


def check_bearer(expected: str) -> None:
    """Raise Unauthorized unless the request carries ``Authorization: Bearer <expected>``."""
    token = request_bearer()
    if token is None:
        raise Unauthorized("missing bearer token: send Authorization: Bearer <SIDECAR_API_KEY>")
    if not token_matches(token, expected):
        raise Unauthorized("invalid API key")


def has_api_key(settings: Settings) -> bool:
    """True when the request carries the right API key (for open routes that say more to it)."""
    if settings.api_key is None:
        return False
    try:
        check_bearer(settings.api_key.get_secret_value())
    except Unauthorized:
        return False
    return True
