"""Bearer tokens (RFC 6750) for every HTTP API of the project: the sidecar's ``/v1`` routes, its
moderation API and the model host.

One parser, so the three agree on what a credential is. The scheme name is case-insensitive
(RFC 7235 §2.1, which RFC 6750 §2.1 builds on): ``bearer``, ``Bearer`` and ``BEARER`` are the
same. Tokens are compared in constant time, so response times tell nothing about how much of a
key was right.
"""

from __future__ import annotations

import hmac

from flask import request


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization`` header value, or None when it carries no bearer token
    (missing header, another scheme, an empty token)."""
    scheme, _, token = (header or "").strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def request_bearer() -> str | None:
    """The bearer token of the Flask request being handled, or None."""
    return bearer_token(request.headers.get("Authorization"))


def token_matches(token: str | None, expected: str | bytes) -> bool:
    """True when ``token`` is ``expected``, compared in constant time; an empty ``expected``
    (no key configured) matches nothing."""
    if token is None or not expected:
        return False
    key = expected.encode() if isinstance(expected, str) else expected
    return hmac.compare_digest(token.encode(), key)
