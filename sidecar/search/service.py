"""Hybrid search: the adapters (embedder, SQL legs) around the pure fusion and aggregation core."""

from __future__ import annotations

import contextvars
import logging
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from models.protocols import Embedder
from sidecar.config.settings import Settings
from sidecar.core.chain_flags import ChainFlags
from sidecar.core.fusion import Fusion, FusionMethod
from sidecar.core.postchoice import ANSWER_RULE, Chooser, LinkRule
from sidecar.core.ranking import MAX_POST_CANDIDATES, enough_topics, rank_topics
from sidecar.core.searchconfig import SearchConfig
from sidecar.core.text import excerpt, html_to_text
from sidecar.core.trace import Trace
from sidecar.core.types import Leg, Mode, PostHit, TopicHit, TopicScore
from sidecar.db import Database
from sidecar.db.embeddings import RegisteredModel
from sidecar.db.evidence_read import post_similarities
from sidecar.db.forum_read import PostRecord, public_posts
from sidecar.db.search_sql import semantic_leg
from sidecar.db.vector_share import ShareCache
from sidecar.errors import InvalidInput
from sidecar.keyword import KeywordIndex, keyword_leg
from sidecar.search.chain import RerankChain
from sidecar.search.links import PostLinker

log = logging.getLogger(__name__)



@dataclass(frozen=True)
class SearchOptions:
    """Per-request knobs; ``None`` means "as served" (the search profile, else the settings)."""

    mode: Mode | None = None
    strategy: int | None = None
    topic_score: TopicScore | None = None
    fusion: Fusion | None = None
    chain: ChainFlags | None = None  # the rerank chain's stages
    chooser: Chooser | None = None  # how each topic's linked post is chosen
    # Topics left out of this search (e.g. the topic a member is reading, or the topics the
    # answerability evaluation hides): neither leg returns their posts.
    exclude_topics: frozenset[int] = frozenset()


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
                "chosen": self.topic.link_reason or "best fused post",
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
    # Every ranked topic, ``topics`` first: what the post chooser read (its keyword scores).
    ranked: list[TopicHit] = field(default_factory=list)


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
        served: SearchConfig | None = None,
        served_details: SearchConfig | None = None,
        keyword: KeywordIndex | None = None,
        served_by: dict[str, Any] | None = None,
        link_rule: LinkRule = ANSWER_RULE,
    ) -> None:
        self.db = db
        self.embedder = embedder
        self.model = model
        self.settings = settings
        self.iterative_scan = iterative_scan
        self.served = served or SearchConfig()
        # Served to queries that come with details, when the profile tuned that shape apart.
        self.served_details = served_details
        # This node's keyword index of the database (kept in sync by its owner, see
        # sidecar/keyword/node.py); one is opened on the state directory when none is given.
        self.keyword = keyword or KeywordIndex(db, settings.state_dir, settings.ts_config)
        self.chain = RerankChain(db, model)
        # Where the served configuration comes from (the settings, or a search profile and
        # the judgements it was tuned on): each search trace says it.
        self.served_by = served_by or {"source": "settings"}
        self.linker = PostLinker(db, model, per_topic=settings.link_posts_per_topic,
                                 reader=self.chain.reader)
        self.link_rule = link_rule
        # The index's public share, estimated now and then: it scales the HNSW ef_search.
        self.vector_share = ShareCache()
        # Runs the keyword leg of a hybrid search beside the semantic one (leg_rankings): one
        # thread per request thread at most. Threads start on first use, in the process that
        # searches (never before a fork).
        self.workers = ThreadPoolExecutor(max_workers=max(1, settings.threads),
                                          thread_name_prefix="keyword-leg")

    def config(self, options: SearchOptions, *, details: bool = False) -> SearchConfig:
        """What a search with these options runs: the served configuration (of a query with
        or without details), overridden by the request."""
        served = self.served_details if details and self.served_details else self.served
        return served.override(mode=options.mode, fusion=options.fusion,
                                    topic_score=options.topic_score, chain=options.chain)

    def chain_flags(self, options: SearchOptions) -> ChainFlags:
        """The rerank chain a request runs: its own flags, else the served ones."""
        return self.config(options).chain

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

    def first_post_k(self, n_topics: int) -> int:
        """Posts asked of each leg on the first try for ``n_topics`` topics."""
        return max(self.settings.post_candidates, n_topics * 5)

    def check_details(self, details: str | None) -> str | None:
        """Normalize a question's details; refuse over-long ones (None or blank: none)."""
        if details is None:
            return None
        details = " ".join(details.split())
        if len(details) > self.settings.max_details_chars:
            raise InvalidInput(
                f"details are {len(details)} characters long; the limit is "
                f"{self.settings.max_details_chars}"
            )
        return details or None

    def find_topics(
        self, query: str, n_topics: int, options: SearchOptions, trace: Trace | None = None,
        *, details: str | None = None, link: int | None = None, vector: Any = None,
    ) -> SearchOutcome:
        """The best ``n_topics`` topics (or fewer if the forum has fewer matches).

        ``details`` is the rest of a question whose title or gist is ``query`` (the body of a
        topic being written, say): the semantic leg reads both, the keyword leg matches the
        query's words only, since a long body's incidental words would match everything.

        The first ``link`` topics (default: all ``n_topics``) get their linked post chosen
        (``TopicHit.answers``); a deep list that only ranks topics passes 0.

        ``vector`` is a query vector the caller already has (a topic's stored vector, for
        ``/v1/topics/<id>/related``): the semantic leg reads it and no model is called.

        Each leg is asked for more posts than topics, because one topic may hold many matching
        posts; when aggregation leaves fewer topics than asked while a leg was cut off, the legs
        are asked again for twice as many posts.
        """
        trace = trace or Trace()
        query = self.check_query(query)
        details = self.check_details(details)
        strategy = options.strategy or self.settings.strategy
        config = self.config(options, details=details is not None)
        legs = config.legs()
        if vector is not None and Leg.SEMANTIC in legs:
            trace.skip("embed", "a stored vector: no model call")
        elif Leg.SEMANTIC in legs:
            with trace.step("embed") as detail:
                text = f"{query} {details}" if details else query
                vector = self.embedder.embed([text], kind="query")[0]
                detail.update(model=self.model.name, provider=self.embedder.provider)
                if details:
                    detail["details_chars"] = len(details)
        else:
            vector = None
            trace.skip("embed", f"{config.mode.value} mode")
        post_k = self.first_post_k(n_topics)
        served_by = {"source": "request"} if options.fusion else self.served_by
        # lift fusion reads the stored similarity of the posts only the keyword leg found: the
        # keyword leg reads them for all its posts on its own connection (beside the semantic
        # leg when the legs run at once), not in a round trip of its own after both.
        lifted = config.fusion.method is FusionMethod.LIFT and vector is not None
        while True:
            stored: dict[int, float] = {}
            rankings = self.leg_rankings(query, vector, legs, post_k, strategy, trace,
                                         skip_reason=f"{config.mode.value} mode",
                                         exclude=options.exclude_topics,
                                         similarities=stored if lifted else None)
            topics = rank_topics(rankings, config, trace, served_by=served_by,
                                 similarities=self.keyword_only_similarities(
                                     rankings, config, vector, strategy, stored))
            if enough_topics(topics, rankings, n_topics, post_k):
                break
            post_k = min(post_k * 2, MAX_POST_CANDIDATES)
        if config.chain.reorders:  # with every stage off there is no chain step at all
            topics = self.rerank_chain(topics, config.chain, vector, strategy, trace, n_topics)
        topics = self.linker.link(topics, n_topics if link is None else link,
                                  vector=vector, strategy=strategy,
                                  chooser=options.chooser or Chooser(self.settings.link_chooser),
                                  rule=self.link_rule, trace=trace)
        return SearchOutcome(
            topics=topics[:n_topics],
            trace=trace,
            legs={leg: len(hits) for leg, hits in rankings.items()},
            vector=vector,
            ranked=topics,
        )

    def keyword_only_similarities(self, rankings: dict[str, list[PostHit]],
                                  config: SearchConfig, vector: Any, strategy: int,
                                  stored: dict[int, float] | None = None) -> dict[int, float]:
        """``lift`` fusion: the stored similarities of posts only the keyword leg found
        (taken from ``stored`` when the keyword leg read them, else read now)."""
        if config.fusion.method is not FusionMethod.LIFT or vector is None \
                or len(rankings) < 2:
            return {}
        semantic = {h.post_id for h in rankings.get(Leg.SEMANTIC, [])}
        missing = [h.post_id for h in rankings.get(Leg.KEYWORD, []) if h.post_id not in semantic]
        if not missing:
            return {}
        if stored is not None:
            return {pid: stored[pid] for pid in missing if pid in stored}
        with self.db.connection() as conn:
            return post_similarities(conn, model_id=self.model.id, strategy_id=strategy,
                                     dimensions=self.model.dimensions, vector=vector,
                                     post_ids=missing)

    def rerank_chain(self, topics: list[TopicHit], flags: ChainFlags, vector: Any,
                     strategy: int, trace: Trace, needed: int) -> list[TopicHit]:
        """MMR and boosts over the aggregated topics; the fused order when it fails."""
        with trace.step("chain", swallow=True) as detail:
            reordered, info = self.chain.run(topics, flags, vector, strategy, needed=needed)
            detail.update(info)
            return reordered
        return topics  # the step failed (logged in the trace): degrade to the fused order

    def leg_rankings(
        self, query: str, vector: Any, legs: tuple[Leg, ...], post_k: int, strategy: int,
        trace: Trace, *, skip_reason: str = "", exclude: frozenset[int] = frozenset(),
        similarities: dict[int, float] | None = None,
    ) -> dict[str, list[PostHit]]:
        """Each leg's ``post_k`` best public posts (the semantic leg needs ``vector``).

        ``similarities``, when given with a ``vector`` and both legs, is filled with the stored
        similarity of each post the keyword leg found (those with a stored vector).

        With both legs to run (and ``parallel_legs``), the keyword leg runs on a worker thread
        while this one runs the semantic leg, each on its own pooled connection: a hybrid
        search costs about its slower leg, not their sum. Each leg's step is still timed
        alone, and the trace lists them in the same order either way.
        """
        semantic = Leg.SEMANTIC in legs and vector is not None
        keyword = Leg.KEYWORD in legs
        keyword_trace = Trace()
        pending: Future[list[PostHit]] | None = None
        similar = (vector, strategy, similarities) \
            if semantic and keyword and similarities is not None else None
        if semantic and keyword and self.settings.parallel_legs:
            # In this request's context (Flask's, logging's): the worker thread has none.
            pending = self.workers.submit(contextvars.copy_context().run, self.keyword_ranking,
                                          query, post_k, keyword_trace, exclude, similar)
        rankings: dict[str, list[PostHit]] = {}
        try:
            if semantic:
                rankings[Leg.SEMANTIC] = self.semantic_ranking(vector, post_k, strategy, trace,
                                                               exclude)
            else:
                trace.skip("semantic", skip_reason)
        finally:
            # The connection of the semantic leg is back in the pool before this thread waits
            # for the keyword leg, so the two can never wait on each other for a connection.
            if pending is not None:
                wait([pending])
        if keyword:
            try:
                rankings[Leg.KEYWORD] = pending.result() if pending is not None else \
                    self.keyword_ranking(query, post_k, keyword_trace, exclude, similar)
            finally:
                trace.steps.extend(keyword_trace.steps)
        else:
            trace.skip("keyword", skip_reason)
        return rankings

    def semantic_ranking(self, vector: Any, post_k: int, strategy: int, trace: Trace,
                         exclude: frozenset[int] = frozenset()) -> list[PostHit]:
        """The semantic leg: the HNSW index of (model, strategy), public posts only."""
        with trace.step("semantic") as detail, self.db.connection() as conn:
            share = self.vector_share.get(conn, self.model.id, strategy).share
            hits = semantic_leg(
                conn, model_id=self.model.id, strategy_id=strategy,
                dimensions=self.model.dimensions, vector=vector, k=post_k,
                ef_search_min=self.settings.ef_search_min,
                iterative_scan=self.iterative_scan,
                binary=self.settings.index_kind == "binary",
                binary_overfetch=self.settings.binary_overfetch,
                scan_order=self.settings.hnsw_iterative_scan,
                max_scan_tuples=self.settings.hnsw_max_scan_tuples,
                public_share=share, exclude_topics=sorted(exclude),
            )
            detail.update(posts=len(hits), k=post_k, strategy=strategy,
                          index=self.settings.index_kind, public_share=round(share, 3))
        return hits

    def keyword_ranking(self, query: str, post_k: int, trace: Trace,
                        exclude: frozenset[int] = frozenset(),
                        similar: tuple[Any, int, dict[int, float]] | None = None
                        ) -> list[PostHit]:
        """The keyword leg: BM25 in this node's Tantivy index, public posts only.

        ``similar`` = (query vector, strategy, out): ``out`` gets the stored similarity of each
        post found, read on the same connection (what ``lift`` fusion needs of them)."""
        with trace.step("keyword") as detail:
            # The searcher before the connection: finding the index may read the database, and
            # a thread that waits for a second connection while it holds one starves the pool.
            searcher = self.keyword.searcher()
            with self.db.connection() as conn:
                hits = [] if searcher is None else keyword_leg(
                    conn, searcher, ts_config=self.settings.ts_config, query=query,
                    k=post_k, max_words=self.settings.keyword_max_words,
                    question_words=self.settings.keyword_question_words,
                    exclude_topics=exclude,
                )
                detail.update(posts=len(hits), k=post_k, ts_config=self.settings.ts_config,
                              index="missing" if searcher is None else "tantivy")
                if similar is not None and hits:
                    vector, strategy, out = similar
                    out.update(post_similarities(
                        conn, model_id=self.model.id, strategy_id=strategy,
                        dimensions=self.model.dimensions, vector=vector,
                        post_ids=[h.post_id for h in hits]))
        return hits

    def url(self, post: PostRecord) -> str:
        """Post-level link: /t/{slug}/{topic_id}/{post_number}, under the forum's address."""
        return f"{self.settings.forum_url}/t/{post.slug}/{post.topic_id}/{post.post_number}"

    def hydrate(
        self, query: str, topics: list[TopicHit], limit: int, trace: Trace | None = None
    ) -> list[TopicResult]:
        """Titles, links and excerpts for the first ``limit`` topics still public now."""
        trace = trace or Trace()
        with trace.step("hydrate") as detail:
            wanted = [pid for t in topics[: limit + 10] for pid in t.link_order()[:3]]
            with self.db.connection() as conn:
                records = public_posts(conn, wanted)
            results: list[TopicResult] = []
            for topic in topics:
                if len(results) >= limit:
                    break
                # The chosen post, if still public, represents the topic (else the next one).
                post = next((records[pid] for pid in topic.link_order() if pid in records), None)
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
        self, query: str, limit: int, options: SearchOptions, *, details: str | None = None
    ) -> tuple[list[TopicResult], Trace]:
        """`POST /v1/search`: the best ``limit`` topics with post-level links."""
        trace = Trace()
        # Five topics more than shown stand in for shown ones no longer public at hydration;
        # only the shown ones are linked first (the post chooser's query reads every public
        # post of each topic), the spares when one of them is needed.
        outcome = self.find_topics(query, limit + 5, options, trace, details=details,
                                   link=limit)
        results = self.hydrate(query, outcome.topics, limit, trace)
        shown = {r.topic.topic_id for r in results}
        if len(outcome.topics) > limit and any(t.topic_id not in shown
                                               for t in outcome.topics[:limit]):
            topics = self.linker.link(
                outcome.ranked, len(outcome.topics), vector=outcome.vector,
                strategy=options.strategy or self.settings.strategy,
                chooser=options.chooser or Chooser(self.settings.link_chooser),
                rule=self.link_rule, trace=trace, start=limit)
            results = self.hydrate(query, topics[:len(outcome.topics)], limit, trace)
        return results, trace
