"""Bearer-token authentication for the /v1 API (constant-time comparison)."""

from __future__ import annotations

import hmac

from flask import request

from sidecar.errors import Unauthorized
from sidecar.settings import Settings


def check_bearer(expected: str) -> None:
    """Raise Unauthorized unless the request carries ``Authorization: Bearer <expected>``."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("missing bearer token: send Authorization: Bearer <SIDECAR_API_KEY>")
    if not hmac.compare_digest(token.strip().encode(), expected.encode()):
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
