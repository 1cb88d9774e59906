"""How many answers run at once, and how often one asker asks: both counted in Redis.

- :class:`InflightSlots`: at most ``cap`` LLM calls in flight on a node. Every API process of
  the node (gunicorn's workers) shares the count, a sorted set of slot tokens scored by when they
  were taken; a slot older than its time-to-live (a process killed mid-answer) is dropped. Taking
  a slot is one Lua script, so two processes cannot both take the last one.
- :class:`AskerLimit`: at most ``per_minute`` answers in any minute for one ``asker`` id (a
  sliding window, one Lua script), so one member cannot spend the LLM.
"""

from __future__ import annotations

import socket
import time
import uuid

from redis import Redis

# KEYS[1]: the set; ARGV: now, the oldest score still alive, cap, token, ttl (s).
_TAKE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""


# A sliding minute of one asker's asks. KEYS[1]: the set; ARGV: now, a minute ago, the limit, a
# token. The ask is counted when it is let through; when it is not, the oldest ask's time says
# when the next one may go.
_COUNT = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[2])
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[3]) then
  return redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]
end
redis.call('ZADD', KEYS[1], ARGV[1], ARGV[4])
redis.call('EXPIRE', KEYS[1], 61)
return false
"""


class InflightSlots:
    """A node-wide cap on LLM calls in flight (``take`` → a token, or None when full)."""

    def __init__(self, redis: Redis, namespace: str, cap: int, ttl_s: float,
                 node: str | None = None) -> None:
        self.redis = redis
        self.cap = cap
        self.ttl_s = ttl_s
        self.key = f"{namespace}:answer:inflight:{node or socket.gethostname()}"
        self._take = redis.register_script(_TAKE)

    def take(self) -> str | None:
        """A slot's token, or None when ``cap`` calls are in flight."""
        token = uuid.uuid4().hex
        now = time.time()
        taken = self._take(keys=[self.key],
                           args=[now, now - self.ttl_s, self.cap, token, int(self.ttl_s) + 60])
        return token if taken else None

    def give_back(self, token: str) -> None:
        """Free the slot ``take`` gave."""
        self.redis.zrem(self.key, token)

    def in_flight(self) -> int:
        """Calls in flight now (slots not yet given back nor expired)."""
        return int(self.redis.zcount(self.key, time.time() - self.ttl_s, "+inf"))


class AskerLimit:
    """At most ``per_minute`` answers in any 60 seconds per asker id (0: no limit)."""

    def __init__(self, redis: Redis, namespace: str, per_minute: int) -> None:
        self.redis = redis
        self.namespace = namespace
        self.per_minute = per_minute
        self._count = redis.register_script(_COUNT)

    def wait_s(self, asker: str | None) -> int | None:
        """Count one ask; None when it may go on, else the seconds until it may."""
        if not asker or self.per_minute <= 0:
            return None
        now = time.time()
        oldest = self._count(keys=[f"{self.namespace}:answer:asker:{asker}"],
                             args=[now, now - 60, self.per_minute, uuid.uuid4().hex])
        if oldest is None:
            return None
        return max(1, int(float(oldest) + 60 - now) + 1)
