"""The scale benchmark's stages, timed as the server runs them (the query vector supplied).

keyword: the Tantivy leg (``keyword_leg``); semantic: the SQL leg (``semantic_leg``) with one
set of HNSW search knobs; hybrid: ``SearchService.search``, which is what ``POST /v1/search``
runs after parsing (both legs, fusion, aggregation, the chain as configured, hydration), with
an embedder that looks the query's vector up instead of computing it. Every call takes its
connection from the pool as a request does. Each post returned is checked against the plan's
own idea of what is public.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from sidecar.config.settings import Settings
from sidecar.core.ranking import rank_topics
from sidecar.core.trace import Trace
from sidecar.core.types import Leg, Mode, PostHit
from sidecar.db import Database
from sidecar.db.embeddings import RegisteredModel
from sidecar.db.search_sql import EF_SEARCH_MAX, semantic_leg
from sidecar.db.vector_share import estimate_share, scaled_ef_search
from sidecar.keyword import KeywordIndex, keyword_leg
from sidecar.search.profile import settings_config
from sidecar.search.service import SearchOptions, SearchService

K = 10
WARMUP = 10  # queries run untimed before a variant whose index is already warm


@dataclass(frozen=True)
class SemanticVariant:
    """The semantic leg's search knobs (the product's settings of the same names)."""

    index: Literal["halfvec", "binary"] = "halfvec"
    ef_search_min: int = 40
    scan_order: str = "strict_order"
    max_scan_tuples: int = 20_000
    overfetch: int = 4

    @classmethod
    def from_settings(cls, settings: Settings, index: str | None = None) -> SemanticVariant:
        """The variant the settings serve (for ``index``, default the served one)."""
        return cls(index=(index or settings.index_kind),  # type: ignore[arg-type]
                   ef_search_min=settings.ef_search_min,
                   scan_order=settings.hnsw_iterative_scan,
                   max_scan_tuples=settings.hnsw_max_scan_tuples,
                   overfetch=settings.binary_overfetch)

    def settings(self, base: Settings) -> Settings:
        """``base`` serving this variant."""
        return base.model_copy(update={
            "index_kind": self.index, "ef_search_min": self.ef_search_min,
            "hnsw_iterative_scan": self.scan_order,
            "hnsw_max_scan_tuples": self.max_scan_tuples, "binary_overfetch": self.overfetch})

    def describe(self) -> dict[str, Any]:
        """JSON form (overfetch only means something for the binary index)."""
        data = asdict(self)
        if self.index != "binary":
            data.pop("overfetch")
        return data


@dataclass
class StageRun:
    """One stage over every query: latencies, what it returned, and privacy violations."""

    ms: list[float]
    found: list[list[int]]  # post ids (keyword, semantic) or topic ids (hybrid), best first
    private_returned: int = 0
    extra: dict[str, Any] = field(default_factory=dict)
    scores: list[list[float]] = field(default_factory=list)  # semantic: cosine of each found

    def percentiles(self) -> tuple[float, float]:
        """(p50, p95) in milliseconds."""
        p50, p95 = np.percentile(self.ms, [50, 95]) if self.ms else (0.0, 0.0)
        return float(p50), float(p95)


def _backend_ticks(pids: set[int]) -> dict[int, int]:
    """CPU clock ticks (user + system) of each PostgreSQL backend, when it runs here."""
    ticks: dict[int, int] = {}
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks[pid] = int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            pass
    return ticks


def timed_calls(call: Callable[[int], Any], n: int, warm: int, pids: set[int]
           ) -> tuple[list[float], list[Any], float | None]:
    """Latencies and results of ``call`` over ``n`` queries after ``warm`` untimed ones, and
    the mean CPU ms per query of this process and the backends it used (``pids``, filled by
    ``call``): unlike wall time, what a query costs whatever else the machine runs."""
    for i in range(min(warm, n)):
        call(i)
    before, cpu0 = _backend_ticks(pids), time.process_time()
    ms: list[float] = []
    out: list[Any] = []
    for i in range(n):
        started = time.perf_counter()
        out.append(call(i))
        ms.append((time.perf_counter() - started) * 1000)
    cpu = time.process_time() - cpu0
    after = _backend_ticks(pids)
    if not after or not n:
        return ms, out, None
    backend = sum(t - before.get(pid, 0) for pid, t in after.items()) / os.sysconf("SC_CLK_TCK")
    return ms, out, (cpu + backend) * 1000 / n


def private_leaks(found: Sequence[Sequence[int]], public: npt.NDArray[np.bool_]) -> int:
    """How many of the ids ``found`` (post ids, 1-based) are not public in ``public``."""
    return sum(1 for ids in found for pid in ids if not public[pid - 1])


def run_keyword(db: Database, index: KeywordIndex, settings: Settings, texts: list[str],
                public: npt.NDArray[np.bool_], k: int, warm: int) -> tuple[StageRun,
                                                                           list[list[PostHit]]]:
    """The keyword leg for each query; also returns its hits (the hybrid reference uses them)."""
    pids: set[int] = set()

    def call(i: int) -> list[PostHit]:
        with db.connection() as conn:
            pids.add(conn.info.backend_pid)
            searcher = index.searcher()
            if searcher is None:
                raise RuntimeError("the keyword index is missing")
            return keyword_leg(conn, searcher, ts_config=settings.ts_config, query=texts[i], k=k,
                               max_words=settings.keyword_max_words,
                               question_words=settings.keyword_question_words)

    ms, hits, cpu = timed_calls(call, len(texts), warm, pids)
    found = [[h.post_id for h in h_list] for h_list in hits]
    return StageRun(ms, found, private_leaks(found, public), extra={"cpu_ms": cpu}), hits


def run_semantic(db: Database, model: RegisteredModel, variant: SemanticVariant,
                 vectors: npt.NDArray[np.float32], public: npt.NDArray[np.bool_], k: int,
                 warm: int) -> StageRun:
    """The semantic leg for each query vector, as SearchService calls it (with the index's
    public share estimated once, as the service caches it)."""
    pids: set[int] = set()
    started = time.perf_counter()
    with db.connection() as conn:
        share = estimate_share(conn, model.id, 1).share
    share_ms = (time.perf_counter() - started) * 1000  # once per process and TTL when served

    def call(i: int) -> list[PostHit]:
        with db.connection() as conn:
            pids.add(conn.info.backend_pid)
            return semantic_leg(conn, model_id=model.id, strategy_id=1,
                                dimensions=model.dimensions, vector=vectors[i], k=k,
                                ef_search_min=variant.ef_search_min, iterative_scan=True,
                                binary=variant.index == "binary",
                                binary_overfetch=variant.overfetch,
                                scan_order=variant.scan_order,
                                max_scan_tuples=variant.max_scan_tuples,
                                public_share=share)

    ms, hits, cpu = timed_calls(call, len(vectors), warm, pids)
    found = [[h.post_id for h in h_list] for h_list in hits]
    return StageRun(ms, found, private_leaks(found, public),
                    extra={"short": sum(1 for f in found if len(f) < k), "cpu_ms": cpu,
                           "public_share": round(share, 4), "share_ms": round(share_ms, 1),
                           "ef_search": scaled_ef_search(variant.ef_search_min, share,
                                                         EF_SEARCH_MAX)},
                    scores=[[h.score for h in h_list] for h_list in hits])


class LookupEmbedder:
    """An embedder that returns the query vectors computed beforehand (nothing is timed of
    the model): the server-side time of a search without its query embedding."""

    provider = "lookup"

    def __init__(self, name: str, texts: list[str], vectors: npt.NDArray[np.float32]) -> None:
        self.name = name
        self.dimensions = int(vectors.shape[1])
        self.max_length = 512
        self._by_text = {t: vectors[i] for i, t in enumerate(texts)}

    def embed(self, texts: Sequence[str], kind: str = "passage") -> npt.NDArray[np.float32]:
        """The stored vector of each text (a text not stored is a bug of the benchmark)."""
        return np.stack([self._by_text[t] for t in texts])

    def truncate_text(self, text: str, max_tokens: int | None = None) -> str:
        """Unused by searches."""
        return text

    def count_tokens(self, text: str) -> int:
        """Unused by searches."""
        return len(text.split())


def run_hybrid(db: Database, model: RegisteredModel, settings: Settings, index: KeywordIndex,
               texts: list[str], vectors: npt.NDArray[np.float32],
               public: npt.NDArray[np.bool_], warm: int) -> StageRun:
    """``SearchService.search`` in hybrid mode for each query: topic ids of the first page."""
    service = SearchService(db, LookupEmbedder(model.name, texts, vectors), model, settings,
                            iterative_scan=True, served=settings_config(settings),
                            keyword=index)
    options = SearchOptions(mode=Mode.HYBRID)

    pids: set[int] = set()
    with db.connection() as conn:  # the pool's connections (min 1, max 2) serve the searches
        pids.add(conn.info.backend_pid)
        with db.connection() as other:
            pids.add(other.info.backend_pid)

    def call(i: int) -> Any:
        return service.search(texts[i], K, options)

    ms, results, cpu = timed_calls(call, len(texts), warm, pids)
    pages = [page for page, _ in results]
    posts = [[r.post.post_id for r in page] for page in pages]
    topics = [[r.topic.topic_id for r in page] for page in pages]
    return StageRun(ms, topics, private_leaks(posts, public),
                    extra={"cpu_ms": cpu, **step_costs([trace for _, trace in results])})


def step_costs(traces: list[Trace]) -> dict[str, Any]:
    """Where a hybrid search's time goes: how many rounds of the legs it took (a round more
    when aggregation left fewer topics than asked: the legs are asked for twice the posts),
    and each step's mean and p95 ms over the queries (the rounds of a step summed)."""
    rounds = [sum(1 for s in t.steps if s.step == "keyword") for t in traces]
    per_step: dict[str, list[float]] = {}
    for trace in traces:
        summed: dict[str, float] = {}
        for step in trace.steps:
            summed[step.step] = summed.get(step.step, 0.0) + step.ms
        for name, total in summed.items():
            per_step.setdefault(name, []).append(total)
    return {
        "rounds_mean": round(float(np.mean(rounds)), 3) if rounds else None,
        "rounds_max": max(rounds, default=None),
        "retried_share": round(float(np.mean([r > 1 for r in rounds])), 3) if rounds else None,
        "step_ms": {name: {"mean": round(float(np.mean(v)), 2),
                           "p95": round(float(np.percentile(v, 95)), 2)}
                    for name, v in per_step.items()},
    }


def hybrid_reference(settings: Settings, keyword_hits: list[list[PostHit]],
                     exact_ids: npt.NDArray[np.int64], exact_sims: npt.NDArray[np.float32],
                     topic_of: npt.NDArray[np.int64], k: int) -> list[list[int]]:
    """The hybrid's first page had the semantic leg been an exact scan (same keyword hits):
    what the approximate index is compared with."""
    config = settings_config(settings).override(mode=Mode.HYBRID)
    pages: list[list[int]] = []
    for kw, ids, sims in zip(keyword_hits, exact_ids, exact_sims, strict=True):
        semantic = [PostHit(post_id=int(p), topic_id=int(topic_of[p - 1]), rank=r, score=float(s))
                    for r, (p, s) in enumerate(zip(ids[:k], sims[:k], strict=True), start=1)
                    if np.isfinite(s)]
        topics = rank_topics({Leg.SEMANTIC: semantic, Leg.KEYWORD: kw}, config)
        pages.append([t.topic_id for t in topics[:K]])
    return pages


def recalls(found: list[list[int]], truth: list[list[int]], k: int = K) -> list[float]:
    """Per query with a truth: the share of the truth's first ``k`` in the result's first
    ``k``."""
    return [len(set(f[:k]) & set(t[:k])) / min(k, len(t))
            for f, t in zip(found, truth, strict=True) if t]


def recall(found: list[list[int]], truth: list[list[int]], k: int = K) -> float:
    """Mean share of each truth's first ``k`` found in the result's first ``k``."""
    shares = recalls(found, truth, k)
    return float(np.mean(shares)) if shares else 0.0


def epsilon_recall(scores: list[list[float]], exact_sims: npt.NDArray[np.float32],
                   k: int = K, epsilon: float = 0.01) -> float:
    """ann-benchmarks' "epsilon recall": the share of the first ``k`` results whose cosine
    distance is within ``1 + epsilon`` of the exact ``k``-th's.

    Where many posts are near-copies of one another (a forum resampled from a small dump) the
    exact top ``k`` is a near-tie, and plain recall counts which of equally near posts came
    back; this counts whether what came back is as near as the exact answer.
    """
    shares = []
    for found, sims in zip(scores, exact_sims, strict=True):
        finite = sims[np.isfinite(sims)][:k]
        if not len(finite):
            continue
        limit = (1.0 - float(finite[-1])) * (1.0 + epsilon)
        shares.append(sum(1 for s in found[:k] if 1.0 - s <= limit) / len(finite))
    return float(np.mean(shares)) if shares else 0.0
