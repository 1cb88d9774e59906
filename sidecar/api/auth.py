"""Bearer-token authentication for the /v1 API (constant-time comparison)."""

from __future__ import annotations

import hmac

from flask import request

from sidecar.errors import Unauthorized


def check_bearer(expected: str) -> None:
    """Raise Unauthorized unless the request carries ``Authorization: Bearer <expected>``."""
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("missing bearer token: send Authorization: Bearer <SIDECAR_API_KEY>")
    if not hmac.compare_digest(token.strip().encode(), expected.encode()):
        raise Unauthorized("invalid API key")
