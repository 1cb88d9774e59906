"""The moderator key: server-side sessions for the pages, a bearer token for the JSON API.

The key (``SIDECAR_MODERATOR_KEY``) is the only secret. Logging in creates a session record in
Redis (name, CSRF token, a fingerprint of the key) that expires after 12 h; the cookie holds only
its id, signed with a key derived from the moderator key. Logging out deletes the record, so a
copied cookie dies with it; a new moderator key ends every session (the signature and the
fingerprint no longer match).

Every attempt goes through :meth:`ModeratorAuth.attempt`: its key is compared, then one atomic
Redis step answers it, and a client past its own limit of wrong keys is refused whatever its
key (the right key too, until its window ends); only wrong keys are counted, in Redis
per client (an IPv6 client is its /64) and for all clients together
(:mod:`sidecar.moderation.throttle`), and past the limits a wrong key is answered 429 instead of
401. A request that presents no key (an API call without ``Authorization``, a login with an
empty key) is no guess and is never counted: a page of image tags or a forged form on another
site must not lock a moderator out. The login form carries a CSRF token of its own too
(:meth:`ModeratorAuth.login_token`), paired with a SameSite=Strict cookie. The client address
is the one the trusted proxies report (``sidecar.api.proxy``).
Without Redis nothing can be counted or looked up: logins, sessions and wrong keys are answered
503, never left uncounted.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import TypeVar

import redis
from itsdangerous import BadSignature, URLSafeTimedSerializer
from pydantic import SecretStr

from models.web.auth import token_matches
from sidecar.errors import ServiceUnavailable
from sidecar.moderation.throttle import GLOBAL_MAX_FAILURES, MAX_FAILURES, FailureThrottle

log = logging.getLogger(__name__)

SESSION_COOKIE = "sidecar_moderator"
SESSION_MAX_AGE_S = 12 * 3600
# The login form's CSRF token, also set as this cookie when the form is shown (SameSite=Strict:
# a form posted from another site comes without it).
LOGIN_COOKIE = "sidecar_login_csrf"
LOGIN_MAX_AGE_S = 3600
REDIS_DOWN = ("moderator sign-in is unavailable right now: its sessions and rate limit live in "
              "Redis, which cannot be reached")

T = TypeVar("T")
__all__ = ["GLOBAL_MAX_FAILURES", "LOGIN_COOKIE", "LOGIN_MAX_AGE_S", "MAX_FAILURES",
           "SESSION_COOKIE", "Attempt", "ModeratorAuth", "Session"]


class Attempt(Enum):
    """What a key attempt from one client gets."""

    ADMITTED = "admitted"
    MISSING = "missing"  # 401, never counted: no key was presented
    WRONG = "wrong"  # 401
    THROTTLED = "throttled"  # 429: the client past its limit (whatever its key), or all clients


@dataclass(frozen=True, slots=True)
class Session:
    """A logged-in moderator."""

    name: str
    csrf: str
    sid: str = ""


class ModeratorAuth:
    """Checks the moderator key, counts wrong ones, and issues, reads and ends sessions."""

    def __init__(self, key: SecretStr | None, redis_client: redis.Redis, prefix: str) -> None:
        self._key = key.get_secret_value().encode() if key is not None else None
        self._redis = redis_client
        self._prefix = f"{prefix}:moderation"
        self._throttle = FailureThrottle(redis_client, prefix, "moderator")
        self._signer = None
        self._fingerprint = ""
        if self._key:
            secret = hmac.new(self._key, b"sidecar moderation session", hashlib.sha256)
            self._signer = URLSafeTimedSerializer(secret.hexdigest(), salt="moderation")
            self._fingerprint = hmac.new(self._key, b"sidecar moderation key id",
                                         hashlib.sha256).hexdigest()[:16]

    @property
    def enabled(self) -> bool:
        """False when no moderator key is configured (the pages and API then answer 503)."""
        return bool(self._key)

    def check_key(self, candidate: str) -> bool:
        """Constant-time comparison with the configured key (no counting: see :meth:`attempt`)."""
        return token_matches(candidate, self._key or b"")

    def attempt(self, client: str, candidate: str | None) -> Attempt:
        """One sign-in or bearer attempt: no key at all is no guess (MISSING, uncounted); else
        compared, then answered by one atomic count (:meth:`FailureThrottle.settle`): refused
        when ``client`` is past its limit whatever the key, a wrong key counted, a right one
        never. Raises ServiceUnavailable when Redis cannot say or count (fail closed)."""
        if candidate is None or not candidate.strip():
            return Attempt.MISSING
        right = self.check_key(candidate)
        number = self._throttle.settle(client, right, self._redis_call)
        if number is None:
            return Attempt.THROTTLED
        if right:
            return Attempt.ADMITTED
        wrong = self._throttle.failed(client, number, self._redis_call)
        return Attempt.THROTTLED if wrong else Attempt.WRONG

    def _redis_call(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except redis.RedisError as exc:
            raise ServiceUnavailable(REDIS_DOWN, internal=str(exc)) from exc

    # -- sessions --------------------------------------------------------------------------------
    def _session_key(self, sid: str) -> str:
        return f"{self._prefix}:session:{sid}"

    def issue(self, name: str) -> tuple[str, Session]:
        """A new session, recorded in Redis: the cookie value and what it holds."""
        assert self._signer is not None
        session = Session(name=name.strip()[:100] or "moderator",
                          csrf=secrets.token_urlsafe(24), sid=secrets.token_urlsafe(24))
        record = json.dumps({"n": session.name, "c": session.csrf, "k": self._fingerprint})
        self._redis_call(lambda: self._redis.set(self._session_key(session.sid), record,
                                                 ex=SESSION_MAX_AGE_S))
        return self._signer.dumps({"s": session.sid}), session

    def read(self, cookie: str | None) -> Session | None:
        """The live session of a cookie, or None if absent, forged, expired or ended."""
        if not cookie or self._signer is None:
            return None
        try:
            data = self._signer.loads(cookie, max_age=SESSION_MAX_AGE_S)
        except BadSignature:
            return None
        sid = data.get("s") if isinstance(data, dict) else None
        if not isinstance(sid, str) or not sid:
            return None
        raw = self._redis_call(lambda: self._redis.get(self._session_key(sid)))
        if raw is None:
            return None  # logged out, or expired
        record = json.loads(raw)
        if not hmac.compare_digest(str(record.get("k", "")), self._fingerprint):
            return None  # issued under another moderator key
        return Session(name=str(record.get("n") or "moderator"), csrf=str(record["c"]), sid=sid)

    def end(self, session: Session) -> None:
        """Log out: the session record goes, and every copy of its cookie with it."""
        self._redis_call(lambda: self._redis.delete(self._session_key(session.sid)))

    @staticmethod
    def csrf_ok(session: Session, token: str | None) -> bool:
        """The form's token is the session's."""
        return bool(token) and hmac.compare_digest(session.csrf.encode(), (token or "").encode())

    # -- the login form's CSRF token -----------------------------------------------------------
    @staticmethod
    def login_token(cookie: str | None) -> str:
        """The login form's token: the browser's own (``LOGIN_COOKIE``), kept so that two open
        forms both work, or a new one."""
        if cookie and 20 <= len(cookie) <= 64 and cookie.isascii():
            return cookie
        return secrets.token_urlsafe(24)

    @staticmethod
    def login_csrf_ok(cookie: str | None, token: str | None) -> bool:
        """The form's token is its cookie's: a form posted from another site has no cookie
        (SameSite=Strict), and its key is then not even counted."""
        return bool(cookie) and bool(token) and hmac.compare_digest(
            (cookie or "").encode(), (token or "").encode())
