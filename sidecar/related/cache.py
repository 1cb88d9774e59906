"""Related-topic lists cached in Redis: every API node shares them; index events drop them.

One entry per topic: its ranked related topics (ids, scores, the posts that may represent each),
never what is shown, which is read from the database at each request (a topic that stopped
being public is dropped there, cached or not). An entry lives as long as discourse-ai keeps its
own (by the topic's age: 15 minutes under 6 hours, an hour under 3 days, 12 hours under 15 days,
else a week), at most ``SIDECAR_RELATED_CACHE_TTL_S`` (0: no cache).

Dropping: an index event that touches topic X deletes X's entry and the entry of every topic
that lists X (a set per listed topic, ``in:X``, kept beside the entries); a category event
bumps a generation number that every entry carries, which drops them all at once. A list
computed while an event is applied may be stored just after the event dropped the old one:
the worker drops the touched topics again once it has re-embedded their posts.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime, timedelta
from typing import Any

import redis

from sidecar.config.settings import Settings
from sidecar.db import Database
from sidecar.db.keyword_sql import index_id
from sidecar.db.related_read import topics_of_posts

log = logging.getLogger(__name__)

# discourse-ai's results_ttl: (topics younger than this, cached this long), then a week.
AGE_TIERS: tuple[tuple[timedelta, int], ...] = (
    (timedelta(hours=6), 15 * 60),
    (timedelta(days=3), 3600),
    (timedelta(days=15), 12 * 3600),
)
OLDEST_TTL_S = 7 * 24 * 3600


def ttl_for(created_at: datetime, now: datetime, longest_s: int) -> int:
    """Seconds to keep the related list of a topic created at ``created_at`` (both naive UTC
    or both aware), at most ``longest_s``."""
    age = now - created_at
    ttl = next((seconds for younger, seconds in AGE_TIERS if age < younger), OLDEST_TTL_S)
    return max(0, min(ttl, longest_s))


@dataclass(frozen=True, slots=True)
class RankedTopic:
    """One related topic as cached: what ranked it and the posts that may represent it."""

    topic_id: int
    score: float
    similarity: float | None
    posts: tuple[int, ...]  # the chooser's order, then the fused one (first public one shown)
    reason: str = ""
    ranks: dict[str, int | None] = field(default_factory=dict)
    leg_scores: dict[str, float] = field(default_factory=dict)
    matched_posts: int = 0

    def as_json(self) -> dict[str, Any]:
        """JSON form (tuples as lists)."""
        data = asdict(self)
        data["posts"] = list(self.posts)
        return data

    @classmethod
    def of_json(cls, data: dict[str, Any]) -> RankedTopic:
        """Back from :meth:`as_json`."""
        return cls(**{**data, "posts": tuple(data["posts"])})


@dataclass(frozen=True)
class CacheRead:
    """What a read found: the list (None on a miss) and the generation it was read under."""

    ranked: list[RankedTopic] | None
    generation: int


class RelatedCache:
    """The entries of one forum database (``namespace``) under the sidecar's Redis prefix."""

    def __init__(self, client: redis.Redis, prefix: str, namespace: str,
                 longest_s: int) -> None:
        self.redis = client
        self.base = f"{prefix}:related:{namespace}"
        self.longest_s = longest_s

    @property
    def enabled(self) -> bool:
        """False when ``SIDECAR_RELATED_CACHE_TTL_S`` is 0."""
        return self.longest_s > 0

    def key(self, topic_id: int) -> str:
        """The entry of a topic's related list."""
        return f"{self.base}:topic:{topic_id}"

    def listed_key(self, topic_id: int) -> str:
        """The set of topics whose cached list holds ``topic_id``."""
        return f"{self.base}:in:{topic_id}"

    @property
    def generation_key(self) -> str:
        """The generation every entry must carry to be read (bumped by category events)."""
        return f"{self.base}:generation"

    def get(self, topic_id: int, fingerprint: str) -> CacheRead:
        """The cached list of a topic (one round trip), if it was ranked the same way
        (``fingerprint``: model, strategy, configuration) under the current generation."""
        raw, gen = self.redis.mget([self.key(topic_id), self.generation_key])
        generation = int(gen) if gen is not None else 0
        if raw is None:
            return CacheRead(None, generation)
        try:
            data = json.loads(raw)
            if data.get("fingerprint") != fingerprint or data.get("generation") != generation:
                return CacheRead(None, generation)
            return CacheRead([RankedTopic.of_json(t) for t in data["topics"]], generation)
        except (ValueError, KeyError, TypeError):
            log.warning("unreadable related-topics cache entry %s: recomputed",
                        self.key(topic_id))
            return CacheRead(None, generation)

    def put(self, topic_id: int, fingerprint: str, generation: int,
            ranked: Sequence[RankedTopic], ttl_s: int) -> None:
        """Store a topic's list for ``ttl_s`` seconds, and note it under each topic it lists."""
        if ttl_s <= 0:
            return
        body = json.dumps({"fingerprint": fingerprint, "generation": generation,
                           "topics": [t.as_json() for t in ranked]}, separators=(",", ":"))
        pipe = self.redis.pipeline(transaction=False)
        pipe.set(self.key(topic_id), body, ex=ttl_s)
        for listed in {t.topic_id for t in ranked}:
            pipe.sadd(self.listed_key(listed), topic_id)
            pipe.expire(self.listed_key(listed), self.longest_s)
        pipe.execute()

    def drop_topics(self, topic_ids: Iterable[int]) -> int:
        """Drop the entries of these topics and of every topic that lists one of them;
        returns how many keys were deleted (entries and their ``in:`` sets)."""
        ids = sorted(set(topic_ids))
        if not ids:
            return 0
        pipe = self.redis.pipeline(transaction=False)
        for topic_id in ids:
            pipe.smembers(self.listed_key(topic_id))
        listing = pipe.execute()
        owners = set(ids) | {int(m) for members in listing for m in members}
        keys = [self.key(t) for t in sorted(owners)] + [self.listed_key(t) for t in ids]
        deleted = 0
        for start in range(0, len(keys), 1000):
            deleted += int(self.redis.delete(*keys[start:start + 1000]))
        return deleted

    def drop_all(self) -> None:
        """Drop every entry of this forum at once (a new generation)."""
        self.redis.incr(self.generation_key)


def forum_cache(client: redis.Redis, settings: Settings, db: Database) -> RelatedCache:
    """The cache of the forum database ``db`` (named by its own id in ``sidecar_meta``, so
    two forums that share a Redis and a prefix never read each other's lists)."""
    with db.connection() as conn:
        namespace = index_id(conn)
    return RelatedCache(client, settings.queue_prefix, namespace, settings.related_cache_ttl_s)


def drop_for_event(client: redis.Redis, settings: Settings, db: Database, event: str,
                   ids: Sequence[int]) -> int:
    """Drop the cached lists an index event touches: a topic's (``topic_changed``), the
    topics of posts (post events), or all of them (``category_changed``). Returns the keys
    deleted (0 for a category: a new generation)."""
    cache = forum_cache(client, settings, db)
    if event == "category_changed":
        cache.drop_all()
        return 0
    if event == "topic_changed":
        return cache.drop_topics(ids)
    with db.connection() as conn:
        topics = topics_of_posts(conn, ids)
    return cache.drop_topics(topics)
