"""Counting wrong keys: per client (an IPv6 client is its /64) and for all clients together.

Used for ``SIDECAR_API_KEY`` (every ``/v1`` route, ``/v1/health`` included) and
``SIDECAR_MODERATOR_KEY`` (the moderator pages and API). Only wrong keys count. Each attempt's
answer is decided by one atomic Redis step once its key was compared (in constant time,
:meth:`FailureThrottle.settle`), so that every API process sees it and parallel attempts are
ordered: a wrong key is counted and gets a number of its own; a right key is let in only while
fewer than ``MAX_FAILURES`` wrong keys from its client were counted in ``FAILURE_WINDOW_S``, and
counts nothing. Past the limit every attempt is answered 429, the right key included, until the
window ends: otherwise the 429 would only slow a guesser down, and a right guess would still get
in. So of 50 keys sent at once no more than ``MAX_FAILURES`` are told apart (401 for a wrong
one, in for the right one), and a right key stands its chance only among the first
``MAX_FAILURES``; while right keys sent at once, however many, are all let in (they never held a
place in the count). A request that presents no key at all is no guess and is not counted (a
page of image tags must not lock a moderator out). Past ``GLOBAL_MAX_FAILURES`` from all
clients together, wrong keys are answered 429 and an alert is logged (ERROR, once a window),
but no client under its own limit is refused: one guesser spread over many addresses must not
lock the key's holders out everywhere.

What makes guessing from many addresses hopeless is the key: keys are checked for length and
estimated strength at start-up (``sidecar/config/keys.py``) and compared in constant time.

An IPv6 client usually owns a whole /64 (SLAAC, privacy addresses): counting address by address
would give it 2**64 fresh starts, so its /64 is counted as one client; an IPv4-mapped IPv6
address is its IPv4 address. A client address that is not an IP (a forged or broken
``X-Forwarded-For`` through a trusted proxy) is one client, ``invalid``, however it is spelt.
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
# An attempt's answer, in one atomic step (Redis runs a script alone), so two attempts sent
# together are ordered: a wrong key (ARGV[3] "0") counted, its window started with the first,
# its number returned; a right key ("1") counts nothing and gets 0 while the client is under
# its limit (ARGV[2]), -1 past it.
_SETTLE = """
if ARGV[3] == '1' then
  if tonumber(redis.call('GET', KEYS[1]) or '0') < tonumber(ARGV[2]) then return 0 end
  return -1
end
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return n
"""
# The count of all clients together: one more wrong key.
_COUNT = """
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return n
"""


class RedisRunner(Protocol):
    """Runs one Redis round trip (and may turn its failure into another error)."""

    def __call__(self, call: Callable[[], T]) -> T:
        """The round trip's result."""
        ...


def client_bucket(address: str | None) -> str:
    """What one client is, for counting: an IPv4 address, an IPv6 /64, ``unknown`` (no address)
    or ``invalid`` (not an IP address)."""
    if not address:
        return "unknown"
    try:
        ip = ipaddress.ip_address(address.strip())
    except ValueError:
        return "invalid"  # each spelling its own bucket would be a fresh start per guess
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
        self._settle = redis_client.register_script(_SETTLE)
        self._count = redis_client.register_script(_COUNT)

    def _key(self, bucket: str) -> str:
        return f"{self._prefix}:failures:{bucket}"

    def settle(self, client: str | None, right: bool, call: RedisRunner | None = None
               ) -> int | None:
        """The answer to an attempt of ``client`` whose key was compared (``right``): None to
        refuse it (429: the client is past its limit, or this wrong key takes it past), 0 to let
        a right key in, a wrong key's number in the window (1 to ``MAX_FAILURES``: 401).

        ``call`` runs the Redis round trip (the moderator's turns a Redis failure into a 503);
        without it a Redis failure is logged and the attempt is answered as its key says,
        uncounted (0).
        """
        key = self._key(client_bucket(client))
        try:
            number = int((call or _direct)(lambda: self._settle(
                keys=[key], args=[FAILURE_WINDOW_S, MAX_FAILURES, "1" if right else "0"])))
        except redis.RedisError as exc:
            log.warning("a %s key attempt was not counted: Redis failed (%s)", self.kind, exc)
            return 0
        if number < 0 or number > MAX_FAILURES:
            return None
        return number

    def failed(self, client: str | None, attempt: int,
               call: RedisRunner | None = None) -> bool:
        """The attempt numbered ``attempt`` (by :meth:`settle`) had a wrong key: count it for all
        clients; True when wrong keys are now answered 429 (all clients past their limit).

        ``call`` runs each Redis round trip, as in :meth:`settle`; without it a Redis failure is
        logged and the key is refused all the same.
        """
        bucket = client_bucket(client)
        run: RedisRunner = call or _direct

        def count() -> tuple[int, int]:
            everyone = self._count(keys=[f"{self._prefix}:failures-all"],
                                   args=[FAILURE_WINDOW_S])
            return attempt, int(everyone)

        def first(what: str) -> Callable[[], bool]:
            return lambda: bool(self._redis.set(f"{self._prefix}:warned:{what}", 1,
                                                ex=FAILURE_WINDOW_S, nx=True))

        log.warning("wrong %s key from %s", self.kind, client)
        try:
            mine, everyone = run(count)
            if mine >= MAX_FAILURES and run(first(bucket)):
                log.warning("%d wrong %s keys from %s in %d s: its next attempts are refused "
                            "(429) until its window ends", mine, self.kind, bucket,
                            FAILURE_WINDOW_S)
            if everyone > GLOBAL_MAX_FAILURES and run(first("all")):
                # An alert, not a lock: the key's holders keep working from their addresses.
                log.error("ALERT: %d wrong %s keys from all clients in %d s: someone may be "
                          "guessing from many addresses; wrong keys are answered 429, clients "
                          "under their own limit still get in with the right key", everyone,
                          self.kind, FAILURE_WINDOW_S)
        except redis.RedisError as exc:
            log.warning("a wrong %s key was not counted: Redis failed (%s)", self.kind, exc)
            return False
        return everyone > GLOBAL_MAX_FAILURES

    def forget(self) -> None:
        """Drop every counter of this key (tests, and after an operator changed the key)."""
        for key in self._redis.scan_iter(f"{self._prefix}:*"):
            self._redis.delete(key)


def _direct(call: Callable[[], T]) -> T:
    return call()
