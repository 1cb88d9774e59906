"""Bearer-token authentication for the /v1 API (the shared parser of :mod:`models.web.auth`).

Every key the API compares goes through :class:`ApiKeyGuard`, so that the wrong-key counts of
:mod:`sidecar.moderation.throttle` see every guess: a wrong key is counted for its client, a
right one never, and a client past its limit is refused (429) whatever its key, on the routes
that need the key and on the open ones that say more to it (``/v1/health``). A request with no
key is no guess: it is refused, never counted.
"""

from __future__ import annotations

import redis
from flask import Flask, current_app, request

from models.web.auth import request_bearer, token_matches
from sidecar.errors import TooManyRequests, Unauthorized
from sidecar.moderation.throttle import FailureThrottle

THROTTLED = "too many requests with a wrong API key from this client; wait a while"
_GUARD = "sidecar_api_key"


class ApiKeyGuard:
    """``SIDECAR_API_KEY`` checked against the request, with its wrong-key counts.

    Redis down, the counts are skipped and the key is still compared: the forum's calls must
    not stop with Redis (the moderator key fails closed instead).
    """

    def __init__(self, key: str, redis_client: redis.Redis, prefix: str) -> None:
        self._key = key
        self._throttle = FailureThrottle(redis_client, prefix, "api")

    def require(self) -> None:
        """Raise Unauthorized unless the request carries ``Authorization: Bearer <key>``, and
        TooManyRequests when its client is past its limit (whatever its key) or this wrong key
        takes it past a limit. No key at all is not a guess and is not counted."""
        token = request_bearer()
        if token is None:
            raise Unauthorized("missing bearer token: send Authorization: Bearer "
                               "<SIDECAR_API_KEY>")
        client = request.remote_addr
        right = token_matches(token, self._key)
        attempt = self._throttle.settle(client, right)  # the answer, decided atomically
        if attempt is None:
            raise TooManyRequests(THROTTLED)
        if right:
            return
        if self._throttle.failed(client, attempt):
            raise TooManyRequests(THROTTLED)
        raise Unauthorized("invalid API key")

    def present(self) -> bool:
        """True when the request carries the right key (for open routes that say more to it);
        a wrong key counts as a guess there too, and a client past its limit is refused."""
        if request_bearer() is None:
            return False
        try:
            self.require()
        except (Unauthorized, TooManyRequests):
            return False
        return True


def install_guard(app: Flask, guard: ApiKeyGuard) -> None:
    """Attach the app's one guard (the app factory)."""
    app.extensions[_GUARD] = guard


def api_key_guard() -> ApiKeyGuard:
    """The running app's guard."""
    guard: ApiKeyGuard = current_app.extensions[_GUARD]
    return guard
