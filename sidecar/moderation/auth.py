"""The moderator key: a signed session cookie for the pages, a bearer token for the JSON API.

The key (``SIDECAR_MODERATOR_KEY``) is the only secret: the cookie is signed with a key derived
from it (so every worker agrees without more configuration, and changing the key logs everyone
out), carries the moderator's name and a CSRF token for the forms, and expires. Failed attempts
are counted per client address in Redis and answered 429 past a limit.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
from dataclasses import dataclass

import redis
from itsdangerous import BadSignature, URLSafeTimedSerializer
from pydantic import SecretStr

log = logging.getLogger(__name__)

SESSION_COOKIE = "sidecar_moderator"
SESSION_MAX_AGE_S = 12 * 3600
MAX_FAILURES = 10  # per client address ...
FAILURE_WINDOW_S = 15 * 60  # ... in this window


@dataclass(frozen=True, slots=True)
class Session:
    """A logged-in moderator."""

    name: str
    csrf: str


class ModeratorAuth:
    """Checks the moderator key and issues and reads session cookies."""

    def __init__(self, key: SecretStr | None, redis_client: redis.Redis, prefix: str) -> None:
        self._key = key.get_secret_value().encode() if key is not None else None
        self._redis = redis_client
        self._prefix = prefix
        self._signer = None
        if self._key:
            secret = hmac.new(self._key, b"sidecar moderation session", hashlib.sha256)
            self._signer = URLSafeTimedSerializer(secret.hexdigest(), salt="moderation")

    @property
    def enabled(self) -> bool:
        """False when no moderator key is configured (the pages and API then answer 503)."""
        return bool(self._key)

    def check_key(self, candidate: str) -> bool:
        """Constant-time comparison with the configured key."""
        return bool(self._key) and hmac.compare_digest(candidate.encode(), self._key or b"")

    def issue(self, name: str) -> tuple[str, Session]:
        """A new session: the cookie value and what it holds."""
        assert self._signer is not None
        session = Session(name=name.strip()[:100] or "moderator", csrf=secrets.token_urlsafe(24))
        return self._signer.dumps({"n": session.name, "c": session.csrf}), session

    def read(self, cookie: str | None) -> Session | None:
        """The session in a cookie, or None if absent, forged or expired."""
        if not cookie or self._signer is None:
            return None
        try:
            data = self._signer.loads(cookie, max_age=SESSION_MAX_AGE_S)
        except BadSignature:
            return None
        if not isinstance(data, dict) or not isinstance(data.get("c"), str):
            return None
        return Session(name=str(data.get("n") or "moderator"), csrf=data["c"])

    @staticmethod
    def csrf_ok(session: Session, token: str | None) -> bool:
        """The form's token is the session's."""
        return bool(token) and hmac.compare_digest(session.csrf.encode(), (token or "").encode())

    # -- failed attempts -------------------------------------------------------------------------
    def _failure_key(self, client: str) -> str:
        return f"{self._prefix}:moderation:failures:{client}"

    def blocked(self, client: str) -> bool:
        """Too many failed attempts from this client recently."""
        try:
            count = self._redis.get(self._failure_key(client))
        except redis.RedisError:
            log.warning("redis unavailable: moderator login attempts are not limited")
            return False
        return count is not None and int(count) >= MAX_FAILURES

    def failed(self, client: str) -> None:
        """Count one failed attempt."""
        try:
            key = self._failure_key(client)
            # The window starts at the first failure (SET NX EX, not EXPIRE NX: Redis 6.2 has no
            # EXPIRE options); later failures only count.
            pipe = self._redis.pipeline()
            pipe.set(key, 0, ex=FAILURE_WINDOW_S, nx=True)
            pipe.incr(key)
            pipe.execute()
        except redis.RedisError:
            log.warning("redis unavailable: failed moderator login not counted")
