"""Scores every candidate configuration on every judged query, through the product's own code.

The legs run once per query (and per candidate count, when aggregation asks for more posts), with
the product's SQL; fusion, aggregation and the per-query metrics are then pure and cheap, so a
few hundred configurations cost seconds. The topics a configuration returns are exactly those
``SearchService.find_topics`` returns for it (the same growth rule, the same functions).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

from sidecar.core.ranking import MAX_POST_CANDIDATES, enough_topics, rank_topics
from sidecar.core.searchconfig import SearchConfig
from sidecar.core.trace import Trace
from sidecar.core.types import Leg, Mode, PostHit, TopicHit
from sidecar.evaluation import metrics as m
from sidecar.search.service import SearchService
from sidecar.tuning.judgements import Judged
from sidecar.tuning.space import Candidate

DEPTH = 10  # topics scored per query (Hit@k, MRR@10, nDCG@10), as `sidecar eval`
METRICS: tuple[str, ...] = ("mrr@10", "hit@1", "hit@5", "ndcg@10")


@dataclass
class LegCache:
    """Each leg's posts for a query text and a candidate count, fetched once."""

    service: SearchService
    strategy: int
    rankings: dict[tuple[str, str | None, int], dict[str, list[PostHit]]] = field(
        default_factory=dict)
    vectors: dict[tuple[str, str | None], Any] = field(default_factory=dict)

    def text(self, query: str) -> str:
        """The query as the search receives it (collapsed, cut to the length limit)."""
        return " ".join(query.split())[: self.service.settings.max_query_chars]

    def legs(self, text: str, post_k: int, details: str | None = None
             ) -> dict[str, list[PostHit]]:
        """Both legs' rankings for ``text`` (and its details) at ``post_k`` posts each."""
        key = (text, details, post_k)
        if key not in self.rankings:
            checked = self.service.check_details(details)
            embedded = f"{text} {checked}" if checked else text
            vector = self.service.embedder.embed([embedded], kind="query")[0]
            self.vectors[(text, details)] = vector
            self.rankings[key] = self.service.leg_rankings(
                text, vector, (Leg.SEMANTIC, Leg.KEYWORD), post_k, self.strategy, Trace())
        return self.rankings[key]

    def topics(self, query: str, config: SearchConfig, n_topics: int = DEPTH,
               details: str | None = None) -> list[TopicHit]:
        """What ``find_topics`` returns for this configuration (growth rule included)."""
        text = self.text(query)
        post_k = self.service.first_post_k(n_topics)
        while True:
            both = self.legs(text, post_k, details)
            rankings = {leg.value: both[leg.value] for leg in config.legs()}
            topics = rank_topics(rankings, config)
            if enough_topics(topics, rankings, n_topics, post_k):
                break
            post_k = min(post_k * 2, MAX_POST_CANDIDATES)
        if config.chain.reorders:  # as find_topics: the rerank chain after aggregation
            vector = self.vectors[(text, details)]
            topics, _ = self.service.chain.run(topics, config.chain, vector, self.strategy,
                                               needed=n_topics)
        return topics[:n_topics]


def query_scores(ranking: Sequence[int], judged: Judged) -> dict[str, float]:
    """The per-query metrics of a topic ranking."""
    return {
        "mrr@10": m.reciprocal_rank(ranking, judged.topics, DEPTH),
        "hit@1": m.hit_at(ranking, judged.topics, 1),
        "hit@5": m.hit_at(ranking, judged.topics, 5),
        "ndcg@10": m.ndcg_at(ranking, judged.topics, DEPTH),
    }


@dataclass
class ScoreTable:
    """metric -> candidates x queries array of per-query scores."""

    candidates: list[Candidate]
    queries: list[Judged]
    scores: dict[str, npt.NDArray[np.float64]]

    @property
    def weights(self) -> npt.NDArray[np.float64]:
        """Each query's weight (1, or the inverse propensity of search-log clicks)."""
        return np.asarray([q.weight for q in self.queries], dtype=np.float64)

    def index(self, name: str) -> int:
        """Position of a candidate by name."""
        return next(i for i, c in enumerate(self.candidates) if c.name == name)

    def save(self, path: Path) -> None:
        """Every per-query score, with the candidates' and queries' names, as .npz."""
        path.parent.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, Any] = {k.replace("@", "_at_"): v for k, v in self.scores.items()}
        np.savez_compressed(path, candidates=np.array([c.name for c in self.candidates]),
                            queries=np.array([q.id for q in self.queries]),
                            weights=self.weights, **arrays)

    def means(self, row: int) -> dict[str, float]:
        """Weighted means of one candidate's metrics."""
        w = self.weights
        return {k: float(v[row] @ w / w.sum()) for k, v in self.scores.items()}


def score_table(cache: LegCache, candidates: list[Candidate], queries: list[Judged], *,
                progress: bool = False) -> ScoreTable:
    """Every candidate on every query."""
    scores = {k: np.zeros((len(candidates), len(queries))) for k in METRICS}
    for j, query in enumerate(tqdm(queries, desc="tune", unit="query", disable=not progress)):
        for i, candidate in enumerate(candidates):
            ranking = [t.topic_id for t in cache.topics(query.text, candidate.config,
                                                         details=query.details)]
            for name, value in query_scores(ranking, query).items():
                scores[name][i, j] = value
    return ScoreTable(candidates=candidates, queries=queries, scores=scores)


def keyword_rank(cache: LegCache, query: Judged, topic_id: int) -> int | None:
    """Rank of ``topic_id`` in the keyword search for the query (None when not in the top 10):
    the position Discourse's own keyword search most likely showed it at."""
    ranking = [t.topic_id for t in cache.topics(query.text, SearchConfig(Mode.KEYWORD),
                                                 details=query.details)]
    return ranking.index(topic_id) + 1 if topic_id in ranking else None


def describe_scores(values: dict[str, float]) -> dict[str, Any]:
    """Rounded metrics for a report."""
    return {k: round(v, 4) for k, v in values.items()}
