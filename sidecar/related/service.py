"""`GET /v1/topics/<id>/related`: public topics related to a public topic, from stored vectors.

The topic's vector is its first public post's stored vector (strategy 1 embeds the title,
category, tags and the post: discourse-ai's topic text); the semantic leg searches every
public post with it, the keyword leg (``SIDECAR_RELATED_MODE=hybrid``) the topic's title, the
legs are fused and aggregated per topic as ``/v1/search`` does for a question with details,
and the topic itself is left out of both legs. No model is called on the request path: a
topic whose posts have no vector yet is related through its title by the keyword leg alone.

The ranked list is cached (:mod:`sidecar.related.cache`); what is shown is read at every
request: the asked topic must be public (else the same 404 as a topic that does not exist),
and so must each related topic's post (a topic that left the public since is skipped).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol

from redis import Redis

from sidecar.config.settings import Settings
from sidecar.core.searchconfig import SearchConfig
from sidecar.core.text import excerpt, html_to_text
from sidecar.core.trace import Trace
from sidecar.core.types import Leg, Mode, TopicHit
from sidecar.db import Database
from sidecar.db.embeddings import RegisteredModel
from sidecar.db.related_read import (
    Card,
    SourceTopic,
    public_cards,
    public_topic,
    topic_and_cards,
    topic_vector,
)
from sidecar.errors import NotFound
from sidecar.related.cache import RankedTopic, RelatedCache, forum_cache, ttl_for
from sidecar.search.service import SearchOptions, SearchService

# The one answer for a topic that does not exist and for one that is not public.
NOT_FOUND = "no public topic with this id"
MAX_LIMIT = 10  # the largest page of /v1/topics/<id>/related (discourse-ai shows 5)
# Topics ranked, linked and cached per topic: the largest page, and room for the closed and
# archived filters and for topics that leave the public while the list is cached (as many as
# /v1/search ranks for its largest default page: a cold list costs about a search).
RANKED = 15
CACHE_VERSION = 1  # bumped when the cached form changes


class RelatedResources(Protocol):
    """What the service takes of the process's resources: the API builds it from its one
    ``Resources`` (``sidecar.runtime.resources``), which this layer never imports."""

    @property
    def settings(self) -> Settings:
        """The process's settings."""
        ...

    @property
    def db(self) -> Database:
        """The connection pool."""
        ...

    @property
    def redis(self) -> Redis:
        """The Redis client (the related lists' cache)."""
        ...

    @property
    def model(self) -> RegisteredModel:
        """The serving embedding model, as registered."""
        ...

    @property
    def search(self) -> SearchService:
        """The search whose legs rank the related topics."""
        ...


@dataclass
class RelatedOutcome:
    """What one call found: the asked topic, the page, where the list came from."""

    source: SourceTopic
    results: list[dict[str, Any]]
    cache: str  # hit, miss, off (no cache) or bypass (an evaluation's exclusions)
    config: SearchConfig
    trace: Trace
    ranked: list[RankedTopic]  # the whole ranked list (before filters and the public check)


def ranked_topics(topics: Sequence[TopicHit]) -> list[RankedTopic]:
    """The cached form of ranked, linked topics."""
    out = []
    for topic in topics:
        best = topic.best
        out.append(RankedTopic(
            topic_id=topic.topic_id, score=round(topic.score, 6),
            similarity=None if topic.similarity is None else round(topic.similarity, 6),
            posts=tuple(topic.link_order()[:3]), reason=topic.link_reason or "best fused post",
            ranks={leg.value: best.ranks.get(leg.value) for leg in Leg},
            leg_scores={k: round(v, 6) for k, v in best.leg_scores.items()},
            matched_posts=len(topic.posts)))
    return out


class RelatedService:
    """Built once per API process from its resources; safe to call from many threads."""

    def __init__(self, res: RelatedResources, *, mode: str | None = None) -> None:
        """``mode``: hybrid or semantic (default ``SIDECAR_RELATED_MODE``)."""
        self.res = res
        self.search = res.search
        self.settings = res.settings
        self.cache: RelatedCache = forum_cache(res.redis, res.settings, res.db)
        self.config = related_config(self.search.config(SearchOptions(), details=True),
                                     mode or self.settings.related_mode)
        self.fingerprint = hashlib.sha256(json.dumps(
            [CACHE_VERSION, RANKED, res.model.id, res.model.name, self.settings.strategy,
             self.config.describe(), self.search.link_rule.source],
            sort_keys=True, default=str).encode()).hexdigest()[:16]

    def related(self, topic_id: int, limit: int, *, closed: bool = True, archived: bool = True,
                exclude: frozenset[int] = frozenset()) -> RelatedOutcome:
        """Up to ``limit`` public topics related to a public topic (NotFound otherwise).

        ``closed``/``archived``: whether such topics may be listed. ``exclude``: topics never
        listed (an evaluation's other questions); such a call neither reads nor fills the cache.
        """
        trace = Trace()
        if not 0 < topic_id < 2**31:  # Discourse ids are PostgreSQL integers
            raise NotFound(NOT_FOUND)
        use_cache = self.cache.enabled and not exclude
        cache = "off" if not self.cache.enabled else "bypass" if exclude else "miss"
        generation = 0
        if use_cache:
            with trace.step("cache") as detail:
                read = self.cache.get(topic_id, self.fingerprint)
                generation = read.generation
                detail.update(hit=read.ranked is not None)
            if read.ranked is not None:
                # One round trip: the topic is still public, and so is what is shown.
                with trace.step("hydrate") as detail, self.res.db.connection() as conn:
                    source, cards = topic_and_cards(conn, topic_id, self.wanted(read.ranked))
                    if source is None:
                        raise NotFound(NOT_FOUND)
                    results = self.show(source, read.ranked, cards, limit, closed, archived,
                                        detail)
                return RelatedOutcome(source=source, results=results, cache="hit",
                                      config=self.config, trace=trace, ranked=read.ranked)
        with trace.step("topic") as detail, self.res.db.connection() as conn:
            found = public_topic(conn, topic_id)
            detail.update(found=found is not None)
        if found is None:
            raise NotFound(NOT_FOUND)
        ranked = self.rank(found, trace, exclude)
        if use_cache:
            ttl = ttl_for(_naive(found.created_at), datetime.now(UTC).replace(tzinfo=None),
                          self.cache.longest_s)
            self.cache.put(topic_id, self.fingerprint, generation, ranked, ttl)
        with trace.step("hydrate") as detail, self.res.db.connection() as conn:
            cards = public_cards(conn, self.wanted(ranked))
            results = self.show(found, ranked, cards, limit, closed, archived, detail)
        return RelatedOutcome(source=found, results=results, cache=cache, config=self.config,
                              trace=trace, ranked=ranked)

    def rank(self, source: SourceTopic, trace: Trace,
             exclude: frozenset[int] = frozenset()) -> list[RankedTopic]:
        """Search the forum with the topic's stored vector and title, without the topic."""
        strategy = self.settings.strategy
        model = self.res.model
        with trace.step("vector") as detail, self.res.db.connection() as conn:
            found = topic_vector(conn, model_id=model.id, strategy_id=strategy,
                                 dimensions=model.dimensions, topic_id=source.topic_id)
            detail.update(found=found is not None, strategy=strategy)
            if found is not None:
                detail["post_id"] = found[0]
        config = self.config
        title = " ".join(source.title.split())
        if found is None or not title:
            # No vector yet: the title alone (keyword); no title: the vector alone.
            config = config.override(mode=Mode.KEYWORD if found is None else Mode.SEMANTIC)
        if found is None and not title:
            return []
        options = SearchOptions(mode=config.mode, fusion=config.fusion,
                                topic_score=config.topic_score, chain=config.chain,
                                exclude_topics=frozenset({source.topic_id}) | exclude)
        outcome = self.search.find_topics(title or source.slug, RANKED, options, trace,
                                          vector=None if found is None else found[1])
        return ranked_topics(outcome.topics)

    @staticmethod
    def wanted(ranked: Sequence[RankedTopic]) -> list[int]:
        """The posts that may represent the listed topics (each topic's cached ones)."""
        return [pid for t in ranked for pid in t.posts]

    def show(self, source: SourceTopic, ranked: Sequence[RankedTopic], cards: dict[int, Card],
             limit: int, closed: bool, archived: bool, detail: dict[str, Any]
             ) -> list[dict[str, Any]]:
        """The first ``limit`` listed topics whose post is public now (``cards``: read now),
        open / not archived when asked, each shown by its first public post.

        ``detail`` counts the topics left out as closed or archived; those that are no longer
        public are passed over without a count: a cached list keeps a topic that went private
        until it is dropped, and a count would tell the API client that one did.
        """
        results: list[dict[str, Any]] = []
        left_out = {"closed": 0, "archived": 0}
        for topic in ranked:
            if len(results) >= limit:
                break
            card = next((cards[pid] for pid in topic.posts if pid in cards), None)
            if card is None or card.post.topic_id == source.topic_id:
                continue
            if card.closed and not closed:
                left_out["closed"] += 1
                continue
            if card.archived and not archived:
                left_out["archived"] += 1
                continue
            results.append(self.result(len(results) + 1, topic, card, source.title))
        # Not "skipped": that key of a step's detail marks the step itself skipped.
        detail.update(results=len(results), left_out=left_out)
        return results

    def result(self, rank: int, topic: RankedTopic, card: Card, query: str) -> dict[str, Any]:
        """One listed topic as the API answers it."""
        post = card.post
        text = html_to_text(post.cooked, drop_quotes=True) or html_to_text(post.cooked)
        url = self.search.url(post)
        return {
            "rank": rank, "topic_id": post.topic_id, "title": post.title, "slug": post.slug,
            "category": post.category, "score": topic.score, "similarity": topic.similarity,
            "url": url,
            "topic_url": f"{self.settings.forum_url}/t/{post.slug}/{post.topic_id}",
            "closed": card.closed, "archived": card.archived,
            "post": {"id": post.post_id, "post_number": post.post_number,
                     "excerpt": excerpt(text, query, self.settings.evidence_chars),
                     "url": url, "chosen": topic.reason},
            "ranks": topic.ranks, "leg_scores": topic.leg_scores,
            "matched_posts": topic.matched_posts,
        }


def related_config(served: SearchConfig, mode: str) -> SearchConfig:
    """What related topics run: search's configuration for a question with details (the
    search profile's, when tuned), in ``SIDECAR_RELATED_MODE``."""
    return served.override(mode=Mode(mode))


def _naive(when: datetime) -> datetime:
    """A timestamp as naive UTC (the forum's columns are ``timestamp without time zone``)."""
    return when.astimezone(UTC).replace(tzinfo=None) if when.tzinfo else when
