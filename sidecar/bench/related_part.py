"""Related topics at forum scale: ``/v1/topics/<id>/related`` cold and warm beside
``/v1/search``, on the same forum and index, in one run.

``sidecar bench --part related --posts 1000000 --private-share 0.5 --vectors public --dims 384``
builds the scale part's forum (:mod:`sidecar.bench.scale_part`: resampled from a real dump,
half of it private), its keyword index and one HNSW index of the served kind, then times:

* **search**: ``SearchService.search`` of the dump's questions, the query vector looked up
  (server side, without the embedding), as the scale part's hybrid row;
* **related cold**: ``RelatedService.related`` of a sample of public topics, every cached list
  dropped first (a new generation): the asked topic's public check, its stored vector, both
  legs, fusion, aggregation, linking, storing the list in Redis, and the public check of what
  is shown;
* **related warm**: the same calls again: the public check of the asked topic, one Redis
  read, the public check of what is shown.

Each shown post is checked against the plan's own idea of what is public, and so is each
asked topic. Outputs: ``DIR/scale.json`` and ``DIR/scale.md`` (the scale part's form).
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import redis

from sidecar.bench import scale_legs as legs
from sidecar.bench import scale_plan as sp
from sidecar.bench import scale_vectors as sv
from sidecar.bench.report import BenchContext, BenchTable
from sidecar.bench.scale_part import ScaleRun, _build
from sidecar.config.settings import Settings
from sidecar.db import Database
from sidecar.db.embeddings import register_model
from sidecar.db.vector_index import index_name
from sidecar.keyword import KeywordIndex
from sidecar.related.service import RelatedService
from sidecar.runtime.resources import LoadedModels, Resources
from sidecar.runtime.services import ServiceUrls, embedded_redis_url
from sidecar.search.profile import ProfileState, settings_config
from sidecar.search.service import SearchService

TOPICS = 200  # public topics asked for their related topics
LIMIT = 5  # the page asked (discourse-ai shows 5)
WARM_UP = 10  # other topics asked first, untimed


def bench_resources(settings: Settings, url: str, db: Database, index: KeywordIndex,
                    model: Any, texts: list[str], queries: np.ndarray) -> Resources:
    """Resources over the scratch forum, as an API process holds them (a lookup embedder)."""
    redis_url = settings.redis_url or embedded_redis_url(settings.state_dir / "bench")
    served = settings_config(settings)
    embedder = legs.LookupEmbedder(model.name, texts, queries)
    search = SearchService(db, embedder, model, settings, iterative_scan=True, served=served,
                           keyword=index)
    profile = ProfileState(config=served, source="settings", path=Path(os.devnull))
    return Resources(settings=settings, urls=ServiceUrls(url, redis_url, False, False), db=db,
                     redis=redis.Redis.from_url(redis_url), model=model, pgvector="",
                     loaded=LoadedModels(embedder=embedder, search=search, profile=profile))


class RelatedRun(ScaleRun):
    """The scale part's forum, one index, then search and related side by side."""

    def __init__(self, ctx: BenchContext) -> None:
        super().__init__(ctx)
        self.dims = list(ctx.extras.get("dims") or [384])
        self.kinds = [self.settings.index_kind]
        self.hybrid = False
        # Its own Redis prefix: a run never reads another's cached lists.
        self.settings = self.settings.model_copy(update={"queue_prefix": f"bench{os.getpid()}"})

    def run_dims(self, url: str, db: Database, index: KeywordIndex, n: int, dims: int,
                 plan: sp.ForumPlan, base_rows: np.ndarray) -> None:
        """Vectors of one size, the served index, then the three stages."""
        s = self.settings
        name = self.source.model if dims == self.source.vectors.shape[1] \
            else f"{self.source.model}-proj{dims}"
        with db.connection() as conn:
            model = register_model(conn, name=name, dimensions=dims, version=1)
        with psycopg.connect(url, autocommit=True) as conn:
            data = sv.load_vectors(conn, model, sv.post_vectors(
                self.source.seeds, base_rows, dims, self.sigma, seed=n),
                only=plan.public if self.vectors == "public" else None)
            conn.execute("VACUUM ANALYZE ai_posts_embeddings")
        mem = s.index_build_mem or f"{max(256, min(8192, 2 * data.nbytes // 2**20))}MB"
        del data
        kind = s.index_kind
        build_s, size_mb = _build(url, model, kind, s.hnsw_m, s.hnsw_ef_construction, mem)
        variant = legs.SemanticVariant.from_settings(s, kind)
        config = {"m": s.hnsw_m, "ef_construction": s.hnsw_ef_construction,
                  **variant.describe(), "parallel_legs": s.parallel_legs}
        common = {"dims": dims, "index": kind, "config": config}
        texts = self.source.query_texts
        queries = sv.to_dims(self.source.query_vectors, dims)
        # Warmed as the scale part warms its first variant, by one untimed pass of every
        # question, so the two parts time the same call on the same state of the index.
        search = legs.run_hybrid(db, model, s, index, texts, queries, plan.public,
                                 warm=len(texts))
        self._row(n, "search", search, build_s=build_s, size_mb=size_mb, **common)
        res = bench_resources(s, url, db, index, model, texts, queries)
        try:
            cold, warm = self.time_related(res, plan)
        finally:
            res.redis.close()
        for stage, run in (("related cold", cold), ("related warm", warm)):
            ratio = {f"{p}_vs_search": round(a / b, 3) if b else None for p, a, b in zip(
                ("p50", "p95"), run.percentiles(), search.percentiles(), strict=True)}
            self._row(n, stage, run, **common, **ratio)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP INDEX "{index_name(model.id, 1, kind)}"')
            conn.execute("TRUNCATE ai_posts_embeddings")

    def time_related(self, res: Resources, plan: sp.ForumPlan
                     ) -> tuple[legs.StageRun, legs.StageRun]:
        """Cold (every list dropped first), then warm, over the same public topics."""
        service = RelatedService(res)
        rng = np.random.default_rng(len(plan.topic_kind))
        public = np.flatnonzero(plan.topic_kind == sp.PUBLIC) + 1
        picked = rng.choice(public, size=min(TOPICS + WARM_UP, len(public)), replace=False)
        warm_up, topics = [int(t) for t in picked[:WARM_UP]], [int(t) for t in picked[WARM_UP:]]
        for topic in warm_up:
            service.related(topic, LIMIT)
        service.cache.drop_all()
        pids: set[int] = set()
        with res.db.connection() as conn:  # the pool's connections serve the calls
            pids.add(conn.info.backend_pid)
            with res.db.connection() as other:
                pids.add(other.info.backend_pid)
        runs = []
        for expected in ("miss", "hit"):
            started = time.perf_counter()
            ms, outs, cpu = legs.timed_calls(lambda i: service.related(topics[i], LIMIT),
                                        len(topics), 0, pids)
            shown = [[r["post"]["id"] for r in out.results] for out in outs]
            asked_private = sum(1 for t in topics if plan.topic_kind[t - 1] != sp.PUBLIC)
            runs.append(legs.StageRun(
                ms, [[r["topic_id"] for r in out.results] for out in outs],
                legs.private_leaks(shown, plan.public) + asked_private,
                extra={"cpu_ms": cpu, "topics": len(topics), "limit": LIMIT,
                       **legs.step_costs([out.trace for out in outs]),
                       "cache_as_expected": sum(1 for o in outs if o.cache == expected),
                       "empty": sum(1 for o in outs if not o.results),
                       "wall_s": round(time.perf_counter() - started, 2)}))
        return runs[0], runs[1]


def run(ctx: BenchContext) -> list[BenchTable]:
    """The part's entry point (``sidecar bench --part related``)."""
    return RelatedRun(ctx).run()
