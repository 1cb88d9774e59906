"""Counting wrong keys: per client (an IPv6 client is its /64) and for all clients together.

Used for ``SIDECAR_API_KEY`` (every ``/v1`` route) and ``SIDECAR_MODERATOR_KEY`` (the moderator
pages and API). The key is always checked first: a request with the right key is never refused
here, from whatever address (a shared NAT, or every client seen as the proxy's address when
``SIDECAR_PROXY_HOPS`` is wrong, must not lock the key's holders out). A wrong key is counted,
in Redis so that every API process sees it, for its client and for all clients; past
``MAX_FAILURES`` in ``FAILURE_WINDOW_S`` for the client, or past ``GLOBAL_MAX_FAILURES`` for all
clients, a wrong key is answered 429 instead of 401 and a warning is logged once per client and
window.

What makes guessing hopeless is the key, not the count: keys have at least
``sidecar.config.settings.MIN_KEY_CHARS`` characters and are compared in constant time. The
counts make a guesser visible to the operator and tell a misconfigured client to stop.

An IPv6 client usually owns a whole /64 (SLAAC, privacy addresses): counting address by address
would give it 2**64 fresh starts, so its /64 is counted as one client; an IPv4-mapped IPv6
address is its IPv4 address.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from typing import Protocol, TypeVar

import redis

log = logging.getLogger(__name__)

MAX_FAILURES = 10  # per client ...
FAILURE_WINDOW_S = 15 * 60  # ... in this window
GLOBAL_MAX_FAILURES = 100  # all clients together, in the same window

T = TypeVar("T")


class RedisRunner(Protocol):
    """Runs one Redis round trip (and may turn its failure into another error)."""

    def __call__(self, call: Callable[[], T]) -> T:
        """The round trip's result."""
        ...


def client_bucket(address: str | None) -> str:
    """What one client is, for counting: an IPv4 address, an IPv6 /64, or the text as given."""
    if not address:
        return "unknown"
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return address.strip()[:64]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip)


class FailureThrottle:
    """Wrong-key counters of one key (``kind``: "api", "moderator") in Redis."""

    def __init__(self, redis_client: redis.Redis, prefix: str, kind: str) -> None:
        self._redis = redis_client
        self._prefix = f"{prefix}:throttle:{kind}"
        self.kind = kind

    def _key(self, bucket: str) -> str:
        return f"{self._prefix}:failures:{bucket}"

    def failed(self, client: str | None, call: RedisRunner | None = None) -> bool:
        """Count one wrong key from ``client``; True when that client is now over a limit.

        ``call`` runs each Redis round trip (the moderator's turns a Redis failure into a 503);
        without it a Redis failure is logged and the client is not held over a limit (its key
        is refused all the same).
        """
        bucket = client_bucket(client)
        run: RedisRunner = call or _direct

        def count() -> tuple[int, int]:
            # Each window starts at its first failure (SET NX EX, not EXPIRE NX: Redis 6.2 has
            # no EXPIRE options); later failures only count.
            pipe = self._redis.pipeline()
            for key in (self._key(bucket), f"{self._prefix}:failures-all"):
                pipe.set(key, 0, ex=FAILURE_WINDOW_S, nx=True)
                pipe.incr(key)
            result = pipe.execute()
            return int(result[1]), int(result[3])

        def first_warning() -> bool:
            return bool(self._redis.set(f"{self._prefix}:warned:{bucket}", 1,
                                        ex=FAILURE_WINDOW_S, nx=True))

        log.warning("wrong %s key from %s", self.kind, client)
        try:
            mine, everyone = run(count)
            over = mine > MAX_FAILURES or everyone > GLOBAL_MAX_FAILURES
            if over and run(first_warning):
                log.warning("%d wrong %s keys from %s in %d s (%d from all clients): answering "
                            "429", mine, self.kind, bucket, FAILURE_WINDOW_S, everyone)
        except redis.RedisError as exc:
            log.warning("a wrong %s key was not counted: Redis failed (%s)", self.kind, exc)
            return False
        return over

    def forget(self) -> None:
        """Drop every counter of this key (tests, and after an operator changed the key)."""
        for key in self._redis.scan_iter(f"{self._prefix}:*"):
            self._redis.delete(key)


def _direct(call: Callable[[], T]) -> T:
    return call()
