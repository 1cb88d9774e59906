"""Runs the configuration matrix through the product's own search and scores every query.

Open corpus: ``SearchService.find_topics`` over the whole forum, as ``POST /v1/search`` runs it
(10 topics, or the stage's candidate count when a stage reranks), then the configuration's
stages. Protocol B: the same pipeline asked for a deep list (every public topic, at most 2,000,
from 5 posts per topic and leg); the query's judged topics are kept in that order, the stages
reorder them, and judged topics the deep list did not reach (no keyword in common, say) are
appended in id order (SemEval's scorer keeps the file order for tied scores, and the ids of the
dump follow that order).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from tqdm import tqdm

from sidecar.core.chain import ChainFlags
from sidecar.core.knee import knee_cut
from sidecar.core.types import TopicHit
from sidecar.db.chain_read import post_vectors
from sidecar.db.forum_read import public_topic_count
from sidecar.evaluation import metrics as m
from sidecar.evaluation.configs import SERVED, EvalConfig, Matrix
from sidecar.evaluation.dataset import EvalDataset, EvalQuery
from sidecar.evaluation.query_cache import CachedQueryEmbedder
from sidecar.evaluation.stages import TopicStage
from sidecar.runtime.resources import Resources
from sidecar.search.service import SearchOptions, SearchService

log = logging.getLogger(__name__)

OPEN_DEPTH = 10  # topics scored in the open corpus (Hit@k, MRR@10, nDCG@10)
POST_K = 5  # post-level Hit@5: the posts linked by the top-5 topics
# Protocol B's deep list: every public topic of the forum, up to this many (find_topics asks
# each leg for 5 posts per topic).
DEEP_TOPICS_MAX = 2000

# Per-query metrics averaged into a configuration's row, in report order. evidence_items: the
# evidence items /v1/retrieve keeps (its limit, or fewer after the knee cut-off); evidence_hit:
# 1 when a relevant topic is among them; redundancy@5: mean pairwise cosine of the posts the
# first five topics link to (lower = more diverse results).
# post_*: the posts the topics link to (post_hit@k: one of the first k topics links to a post
# graded >= 1; post_mrr@10: 1 / the rank of the first such topic; post_good@k: graded 2, where
# the dump grades so).
POST_METRICS: tuple[str, ...] = ("post_hit@1", "post_hit@5", "post_mrr@10", "post_good@1",
                                 "post_good@5")
METRICS: tuple[str, ...] = ("hit@1", "hit@5", "mrr@10", "ndcg@10", *POST_METRICS, "map_b",
                            "evidence_items", "evidence_hit", "redundancy@5")


@dataclass
class QueryResult:
    """How one configuration did on one query."""

    query_id: str
    top: list[int]  # topic ids, best first (up to OPEN_DEPTH)
    linked_posts: list[int]  # the post each of the top-5 topics links to
    first_relevant: int | None
    scores: dict[str, float | None]  # per-query value of each of METRICS
    b_ranking: list[int]
    b_unranked: int  # judged topics the deep list did not reach
    ms: float  # open-corpus retrieval time (query vector cached)

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"query_id": self.query_id, "first_relevant_rank": self.first_relevant,
                **{k: (None if v is None else round(v, 6)) for k, v in self.scores.items()},
                "top_topics": self.top, "linked_posts": self.linked_posts,
                "protocol_b_ranking": self.b_ranking, "protocol_b_unranked": self.b_unranked,
                "ms": round(self.ms, 2)}


@dataclass
class ConfigResult:
    """A configuration's per-query results and averages."""

    config: EvalConfig
    queries: list[QueryResult]
    metrics: dict[str, float | None] = field(default_factory=dict)

    def series(self, metric: str) -> list[float]:
        """The per-query values of a metric (None counted as 0)."""
        return [q.scores.get(metric) or 0.0 for q in self.queries]


@dataclass
class Comparison:
    """A configuration against a reference configuration, on the same queries."""

    config: str
    reference: str
    kind: Literal["baseline", "parent", "served"]
    rr: m.PairedComparison  # wins/losses on reciprocal rank (cut at 10)
    diffs: dict[str, m.PairedComparison]  # metric -> paired bootstrap of the mean difference

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        def one(c: m.PairedComparison) -> dict[str, Any]:
            return {"mean_diff": round(c.mean_diff, 6), "ci_low": round(c.ci_low, 6),
                    "ci_high": round(c.ci_high, 6), "significant": c.significant,
                    "wins": c.wins, "losses": c.losses, "ties": c.ties}
        return {"config": self.config, "reference": self.reference, "kind": self.kind,
                "n": self.rr.n, "wins": self.rr.wins, "losses": self.rr.losses,
                "ties": self.rr.ties,
                "metrics": {name: one(c) for name, c in self.diffs.items()}}


@dataclass
class EvalRun:
    """Everything the report needs."""

    results: list[ConfigResult]
    comparisons: list[Comparison]
    baseline: str
    n_queries: int
    n_scored: int
    query_embed_ms: float


def score_query(
    query: EvalQuery, open_topics: Sequence[TopicHit], b_ranking: list[int], has_posts: bool,
    evidence_items: int,
) -> dict[str, float | None]:
    """The per-query metrics of one configuration's rankings (``evidence_items``: how many of
    its first topics ``/v1/retrieve`` would keep as evidence)."""
    ranking = [t.topic_id for t in open_topics[:OPEN_DEPTH]]
    linked = [t.link_id for t in open_topics[:OPEN_DEPTH]]
    graded = has_posts and any(g >= 2 for g in query.posts.values())
    return {
        "evidence_items": float(evidence_items),
        "evidence_hit": m.hit_at(ranking, query.topics, evidence_items),
        "hit@1": m.hit_at(ranking, query.topics, 1),
        "hit@5": m.hit_at(ranking, query.topics, 5),
        "mrr@10": m.reciprocal_rank(ranking, query.topics, 10),
        "ndcg@10": m.ndcg_at(ranking, query.topics, 10),
        "post_hit@1": m.hit_at(linked, query.posts, 1) if has_posts else None,
        "post_hit@5": m.hit_at(linked, query.posts, POST_K) if has_posts else None,
        "post_mrr@10": m.reciprocal_rank(linked, query.posts, OPEN_DEPTH) if has_posts else None,
        "post_good@1": m.hit_at(linked, query.posts, 1, min_grade=2) if graded else None,
        "post_good@5": m.hit_at(linked, query.posts, POST_K, min_grade=2) if graded else None,
        "map_b": m.average_precision(b_ranking, query.topics),
    }


def protocol_b_order(
    query: EvalQuery, deep: Sequence[TopicHit]
) -> tuple[list[TopicHit], list[int]]:
    """The judged topics in deep-list order, and those the list did not reach (by id)."""
    judged = set(query.topics)
    ranked = [t for t in deep if t.topic_id in judged]
    seen = {t.topic_id for t in ranked}
    return ranked, sorted(judged - seen)


class Runner:
    """Runs configurations over a dataset with the evaluation's resources."""

    def __init__(self, res: Resources, dataset: EvalDataset,
                 stages: dict[str, TopicStage | None], *, progress: bool = True) -> None:
        self.res = res
        self.dataset = dataset
        self.stages = stages
        self.progress = progress
        self.embedder = CachedQueryEmbedder(res.embedder)
        self.queries = dataset.scored()
        # Protocol B deep lists, shared by configurations that differ only after find_topics.
        self._deep_lists: dict[tuple[Any, ...], list[TopicHit]] = {}
        self.deep_topics = min(DEEP_TOPICS_MAX, max(OPEN_DEPTH, public_topics(res)))

    def service(self, config: EvalConfig) -> SearchService:
        """The product's search service with this configuration's settings."""
        settings = self.res.settings.model_copy(update=config.settings_update())
        return SearchService(self.res.db, self.embedder, self.res.model, settings,
                             iterative_scan=self.res.search.iterative_scan,
                             keyword=self.res.search.keyword)

    def query_text(self, query: EvalQuery) -> str:
        """The query as the search receives it (cut to the product's length limit)."""
        return " ".join(query.text.split())[: self.res.settings.max_query_chars]

    def stage_text(self, query: EvalQuery) -> str:
        """What a post-retrieval stage (the cross-encoder) reads: the query and its details."""
        text = f"{query.text} {query.details}" if query.details else query.text
        return " ".join(text.split())[: self.res.settings.max_query_chars]

    def _deep(self, service: SearchService, config: EvalConfig, options: SearchOptions,
              query: EvalQuery) -> list[TopicHit]:
        # Only the deep lists are shared: the open-corpus call is timed, so it always runs.
        text = self.query_text(query)
        key = (text, query.details, options, tuple(sorted(config.settings_update().items())))
        if key not in self._deep_lists:
            self._deep_lists[key] = service.find_topics(
                text, self.deep_topics, options, details=query.details, link=0).topics
        return self._deep_lists[key]

    def run_config(self, config: EvalConfig) -> ConfigResult:
        """Score every query with one configuration."""
        service = self.service(config)
        options = config.options()
        stages = [self.stages[name] for name in config.stages]
        chain = [s for s in stages if s is not None]
        flags = options.chain or ChainFlags()
        limit = self.res.settings.retrieve_limit
        # The knee reads the scores of every candidate /v1/retrieve reranks, as it does there.
        wide = max(3 * limit, self.res.settings.rerank_candidates_min)
        depth = max([OPEN_DEPTH, *(s.candidates for s in chain), *([wide] if flags.knee else [])])
        out: list[QueryResult] = []
        for query in tqdm(self.queries, desc=config.name, unit="query",
                          disable=not self.progress):
            text, reread = self.query_text(query), self.stage_text(query)
            started = time.perf_counter()
            topics = service.find_topics(text, depth, options, details=query.details).topics
            for stage in chain:
                topics = stage.apply(reread, topics)
            ms = (time.perf_counter() - started) * 1000
            ranked, unranked = protocol_b_order(
                query, self._deep(service, config, options, query))
            for stage in chain:
                ranked = stage.apply(reread, ranked)
            b_ranking = [t.topic_id for t in ranked] + unranked
            kept = self.evidence_kept(topics, flags, reranked=bool(chain), limit=limit,
                                      wide=wide)
            scores = score_query(query, topics, b_ranking, self.dataset.has_post_qrels, kept)
            scores["redundancy@5"] = self.redundancy(topics[:POST_K], config.strategy)
            out.append(QueryResult(
                query_id=query.id, top=[t.topic_id for t in topics[:OPEN_DEPTH]],
                linked_posts=[t.link_id for t in topics[:POST_K]],
                first_relevant=m.first_relevant_rank([t.topic_id for t in topics],
                                                     query.topics),
                scores=scores, b_ranking=b_ranking, b_unranked=len(unranked), ms=ms))
        result = ConfigResult(config=config, queries=out)
        result.metrics = aggregate(out, self.dataset.has_post_qrels)
        return result

    def evidence_kept(self, topics: Sequence[TopicHit], flags: ChainFlags, *, reranked: bool,
                      limit: int, wide: int) -> int:
        """How many of the first ``limit`` topics ``/v1/retrieve`` keeps as evidence.

        With the knee on, as the pipeline does: the cut reads the cross-encoder's scores after
        a rerank stage (the topics' scores), else each topic's bi-encoder relevance (its public
        post most similar to the query, read when it was linked).
        """
        if not flags.knee:
            return min(limit, len(topics))
        head = list(topics[:wide])
        scores: list[float | None] = ([t.score for t in head] if reranked
                                      else [t.similarity for t in head])
        return knee_cut(scores, limit=limit, min_items=flags.knee_min_items,
                        sensitivity=flags.knee_sensitivity).kept

    def redundancy(self, topics: Sequence[TopicHit], strategy: int) -> float | None:
        """Mean pairwise cosine of the topics' linked posts (None with fewer than two)."""
        with self.res.db.connection() as conn:
            vectors = post_vectors(conn, model_id=self.res.model.id, strategy_id=strategy,
                                   dimensions=self.res.model.dimensions,
                                   post_ids=[t.link_id for t in topics])
        return m.redundancy([vectors[t.link_id] for t in topics if t.link_id in vectors])

    def prime(self) -> None:
        """Embed every query once (one at a time, as a request would) before any timing."""
        for query in self.queries:
            text = self.query_text(query)
            details = self.res.search.check_details(query.details)
            self.embedder.embed([f"{text} {details}" if details else text], kind="query")


def public_topics(res: Resources) -> int:
    """How many topics have at least one public post."""
    with res.db.connection() as conn:
        return public_topic_count(conn)


def aggregate(queries: Sequence[QueryResult], has_posts: bool) -> dict[str, float | None]:
    """Means over the scored queries, plus diagnostics."""
    out: dict[str, float | None] = {}
    for name in METRICS:
        values = [q.scores[name] for q in queries if q.scores.get(name) is not None]
        out[name] = m.mean([v for v in values if v is not None]) if values else None
    if not has_posts:
        for name in POST_METRICS:
            out[name] = None
    judged = sum(len(q.b_ranking) for q in queries)
    out["b_unranked_share"] = (sum(q.b_unranked for q in queries) / judged) if judged else 0.0
    latencies = sorted(q.ms for q in queries)
    out["ms_mean"] = m.mean(latencies)
    out["ms_p95"] = float(np.percentile(latencies, 95)) if latencies else 0.0
    return out


COMPARED: tuple[str, ...] = ("mrr@10", "ndcg@10", "hit@5", "map_b", "post_hit@1", "post_hit@5",
                             "post_mrr@10")
# The served configuration is also compared with these (besides the baseline).
SERVED_REFERENCES: tuple[str, ...] = ("semantic-best", "keyword-best", "hybrid-best",
                                       "served-link-fused", "served-link-semantic")


def compare_configs(
    results: Sequence[ConfigResult], baseline: str, *, resamples: int = 10_000, seed: int = 0,
    confidence: float = 0.95,
) -> list[Comparison]:
    """Every configuration against the baseline, and against its parent when that differs."""
    by_name = {r.config.name: r for r in results}
    ref = by_name[baseline]
    out: list[Comparison] = []

    def against(result: ConfigResult, other: ConfigResult,
                kind: Literal["baseline", "parent", "served"]) -> Comparison:
        ids = [q.query_id for q in result.queries]
        if ids != [q.query_id for q in other.queries]:
            raise ValueError("configurations were run on different queries")
        stat: Callable[[str], m.PairedComparison] = lambda name: m.compare(  # noqa: E731
            result.series(name), other.series(name), resamples=resamples, seed=seed,
            confidence=confidence)
        return Comparison(config=result.config.name, reference=other.config.name, kind=kind,
                          rr=stat("mrr@10"), diffs={name: stat(name) for name in COMPARED})

    for result in results:
        if result.config.name == baseline:
            continue
        out.append(against(result, ref, "baseline"))
        parent = result.config.parent
        if parent and parent != baseline and parent in by_name:
            out.append(against(result, by_name[parent], "parent"))
    served = by_name.get(SERVED)
    if served is not None:
        # What is served against each single leg (and today's hybrid), whatever the baseline.
        for name in SERVED_REFERENCES:
            if name in by_name and name != baseline:
                out.append(against(served, by_name[name], "served"))
    return out


def run_matrix(
    res: Resources, dataset: EvalDataset, matrix: Matrix, stages: dict[str, TopicStage | None],
    *, resamples: int = 10_000, seed: int = 0, progress: bool = True,
) -> EvalRun:
    """Run every configuration of the matrix and compare them."""
    runner = Runner(res, dataset, stages, progress=progress)
    runner.prime()
    results = [runner.run_config(config) for config in matrix.configs]
    comparisons = compare_configs(results, matrix.baseline, resamples=resamples, seed=seed)
    embed_ms = m.mean(runner.embedder.embed_ms)
    return EvalRun(results=results, comparisons=comparisons, baseline=matrix.baseline,
                   n_queries=len(dataset.queries), n_scored=len(runner.queries),
                   query_embed_ms=embed_ms)
