"""Hybrid search: the adapters (embedder, SQL legs) around the pure fusion and aggregation core."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from models.protocols import Embedder
from sidecar.chain_service import RerankChain
from sidecar.core.aggregate import aggregate_topics
from sidecar.core.chain import ChainFlags
from sidecar.core.fusion import rrf
from sidecar.core.text import excerpt, html_to_text
from sidecar.core.trace import Trace
from sidecar.core.types import Leg, Mode, PostHit, TopicHit, TopicScore
from sidecar.db import Database
from sidecar.db.embeddings import RegisteredModel
from sidecar.db.forum_read import PostRecord, public_posts
from sidecar.db.search_sql import TermStats, keyword_leg, semantic_leg
from sidecar.errors import InvalidInput
from sidecar.settings import Settings

log = logging.getLogger(__name__)

MAX_POST_CANDIDATES = 5000


@dataclass(frozen=True)
class SearchOptions:
    """Per-request knobs; ``None`` means "use the setting"."""

    mode: Mode = Mode.HYBRID
    strategy: int | None = None
    topic_score: TopicScore | None = None
    rrf_k: int | None = None
    chain: ChainFlags | None = None  # the rerank chain's stages (None: SIDECAR_CHAIN_*)


@dataclass
class TopicResult:
    """A topic as returned to the caller, linked at the level of its best post."""

    topic: TopicHit
    post: PostRecord
    excerpt: str
    url: str

    def as_dict(self, rank: int) -> dict[str, Any]:
        """JSON form of one result."""
        best = self.topic.best
        return {
            "rank": rank,
            "topic_id": self.topic.topic_id,
            "title": self.post.title,
            "slug": self.post.slug,
            "category": self.post.category,
            "score": round(self.topic.score, 6),
            "url": self.url,
            "post": {
                "id": self.post.post_id,
                "post_number": self.post.post_number,
                "excerpt": self.excerpt,
                "url": self.url,
            },
            "ranks": {leg.value: best.ranks.get(leg.value) for leg in Leg},
            "leg_scores": {k: round(v, 6) for k, v in best.leg_scores.items()},
            "matched_posts": len(self.topic.posts),
        }


@dataclass
class SearchOutcome:
    """Ranked topics (all candidates, best first) and the trace of how they were found."""

    topics: list[TopicHit]
    trace: Trace
    legs: dict[str, int] = field(default_factory=dict)
    vector: Any = None  # the query's embedding (numpy array), None in keyword mode


class SearchService:
    """Runs the legs, fuses them and aggregates per topic; hydrates results for display."""

    def __init__(
        self,
        db: Database,
        embedder: Embedder,
        model: RegisteredModel,
        settings: Settings,
        *,
        iterative_scan: bool = True,
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.model = model
        self.settings = settings
        self.iterative_scan = iterative_scan
        self.term_stats = TermStats()
        self.chain = RerankChain(db, model)
        self.chain_defaults = settings.chain_flags()

    def chain_flags(self, options: SearchOptions) -> ChainFlags:
        """The rerank chain a request runs: its own flags, else the settings'."""
        return options.chain if options.chain is not None else self.chain_defaults

    def check_query(self, query: str) -> str:
        """Normalize a query; refuse an empty or over-long one."""
        query = " ".join(query.split())
        if not query:
            raise InvalidInput("query is empty")
        if len(query) > self.settings.max_query_chars:
            raise InvalidInput(
                f"query is {len(query)} characters long; the limit is "
                f"{self.settings.max_query_chars}"
            )
        return query

    def find_topics(
        self, query: str, n_topics: int, options: SearchOptions, trace: Trace | None = None
    ) -> SearchOutcome:
        """The best ``n_topics`` topics (or fewer if the forum has fewer matches).

        Each leg is asked for more posts than topics, because one topic may hold many matching
        posts; when aggregation leaves fewer topics than asked while a leg was cut off, the legs
        are asked again for twice as many posts.
        """
        trace = trace or Trace()
        query = self.check_query(query)
        strategy = options.strategy or self.settings.strategy
        method = options.topic_score or TopicScore(self.settings.topic_score)
        k = options.rrf_k if options.rrf_k is not None else self.settings.rrf_k
        legs = options.mode.legs()
        vector = None
        if Leg.SEMANTIC in legs:
            with trace.step("embed") as detail:
                vector = self.embedder.embed([query], kind="query")[0]
                detail.update(model=self.model.name, provider=self.embedder.provider)
        else:
            trace.skip("embed", "keyword mode")
        post_k = max(self.settings.post_candidates, n_topics * 5)
        while True:
            rankings: dict[str, list[PostHit]] = {}
            with self.db.connection() as conn:
                if vector is not None:
                    with trace.step("semantic") as detail:
                        rankings[Leg.SEMANTIC] = semantic_leg(
                            conn, model_id=self.model.id, strategy_id=strategy,
                            dimensions=self.model.dimensions, vector=vector, k=post_k,
                            ef_search_min=self.settings.ef_search_min,
                            iterative_scan=self.iterative_scan,
                            binary=self.settings.index_kind == "binary",
                            binary_overfetch=self.settings.binary_overfetch,
                        )
                        detail.update(posts=len(rankings[Leg.SEMANTIC]), k=post_k,
                                      strategy=strategy, index=self.settings.index_kind)
                else:
                    trace.skip("semantic", f"{options.mode.value} mode")
                if Leg.KEYWORD in legs:
                    with trace.step("keyword") as detail:
                        rankings[Leg.KEYWORD] = keyword_leg(
                            conn, ts_config=self.settings.ts_config, query=query, k=post_k,
                            stats=self.term_stats,
                        )
                        detail.update(posts=len(rankings[Leg.KEYWORD]), k=post_k,
                                      ts_config=self.settings.ts_config)
                else:
                    trace.skip("keyword", f"{options.mode.value} mode")
            with trace.step("fuse") as detail:
                fused = rrf(rankings, k=k)
                detail.update(method="rrf", k=k, posts=len(fused))
            with trace.step("aggregate") as detail:
                topics = aggregate_topics(fused, method)
                detail.update(method=method.value, topics=len(topics))
            cut_off = any(len(hits) >= post_k for hits in rankings.values())
            if len(topics) >= n_topics or not cut_off or post_k >= MAX_POST_CANDIDATES:
                break
            post_k = min(post_k * 2, MAX_POST_CANDIDATES)
        flags = self.chain_flags(options)
        if flags.reorders:  # with every stage off there is no chain step at all
            topics = self._rerank_chain(topics, flags, vector, strategy, trace, n_topics)
        return SearchOutcome(
            topics=topics[:n_topics],
            trace=trace,
            legs={leg: len(hits) for leg, hits in rankings.items()},
            vector=vector,
        )

    def _rerank_chain(self, topics: list[TopicHit], flags: ChainFlags, vector: Any,
                      strategy: int, trace: Trace, needed: int) -> list[TopicHit]:
        """MMR and boosts over the aggregated topics; the fused order when it fails."""
        with trace.step("chain", swallow=True) as detail:
            reordered, info = self.chain.run(topics, flags, vector, strategy, needed=needed)
            detail.update(info)
            return reordered
        return topics  # the step failed (logged in the trace): degrade to the fused order

    def url(self, post: PostRecord) -> str:
        """Post-level link: /t/{slug}/{topic_id}/{post_number}, under the forum's address."""
        return f"{self.settings.forum_url}/t/{post.slug}/{post.topic_id}/{post.post_number}"

    def hydrate(
        self, query: str, topics: list[TopicHit], limit: int, trace: Trace | None = None
    ) -> list[TopicResult]:
        """Titles, links and excerpts for the first ``limit`` topics still public now."""
        trace = trace or Trace()
        with trace.step("hydrate") as detail:
            wanted = [p.post_id for t in topics[: limit + 10] for p in t.posts[:3]]
            with self.db.connection() as conn:
                records = public_posts(conn, wanted)
            results: list[TopicResult] = []
            for topic in topics:
                if len(results) >= limit:
                    break
                # The best post still public represents the topic.
                post = next((records[p.post_id] for p in topic.posts if p.post_id in records), None)
                if post is None:
                    continue
                text = html_to_text(post.cooked, drop_quotes=True) or html_to_text(post.cooked)
                results.append(TopicResult(
                    topic=topic, post=post,
                    excerpt=excerpt(text, query, self.settings.evidence_chars),
                    url=self.url(post),
                ))
            detail.update(results=len(results))
        return results

    def search(
        self, query: str, limit: int, options: SearchOptions
    ) -> tuple[list[TopicResult], Trace]:
        """`POST /v1/search`: the best ``limit`` topics with post-level links."""
        trace = Trace()
        outcome = self.find_topics(query, limit + 5, options, trace)
        return self.hydrate(query, outcome.topics, limit, trace), trace
