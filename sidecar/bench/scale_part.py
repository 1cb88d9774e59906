"""Search at forum scale: forums of 100k to 1M posts, half private, every stage timed.

For each size: a forum resampled from a real dump (:mod:`sidecar.bench.scale_plan`, loaded by
:mod:`sidecar.bench.scale_forum`) in a scratch database, its keyword index built as
``sidecar keyword rebuild`` does, and for each vector size the posts' vectors
(:mod:`sidecar.bench.scale_vectors`), the product's HNSW indexes (halfvec cosine and
binary-quantized, built by ``ensure_index``), then the dump's questions through the keyword leg,
the semantic leg and the hybrid pipeline (:mod:`sidecar.bench.scale_legs`). Recall@10 of the
semantic leg is against the exact top 10 of the public posts (numpy over the stored float16
vectors); of the hybrid, against the same pipeline with that exact top list as its semantic leg.
Outputs: ``DIR/scale.json``, ``DIR/scale.md``, ``DIR/scale.png`` (see docs/performance.md).
"""

from __future__ import annotations

import itertools
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from sidecar.bench import scale_alt as alt
from sidecar.bench import scale_legs as legs
from sidecar.bench import scale_plan as sp
from sidecar.bench import scale_seeds as seeds
from sidecar.bench import scale_vectors as sv
from sidecar.bench.report import BenchContext, BenchTable
from sidecar.bench.scale_forum import count_public, import_source, write_forum
from sidecar.bench.scale_report import ScaleReport
from sidecar.bench.scratch import scratch_database
from sidecar.config.settings import Settings
from sidecar.db import Database
from sidecar.db.embeddings import RegisteredModel, register_model
from sidecar.db.migrate import upgrade
from sidecar.db.vector_index import ensure_index, index_name
from sidecar.keyword import KeywordIndex, rebuild_keyword_index
from sidecar.runtime.services import embedded_postgres_url

log = logging.getLogger(__name__)

DEFAULT_DUMP = Path("../shared/eval/qatarliving")
FULL_SIZES, QUICK_SIZES = (100_000, 300_000, 1_000_000), (20_000,)
DIMS = (384, 1024)


def _variants(settings: Settings, index: str, sweep: dict[str, list[Any]]
              ) -> list[tuple[legs.SemanticVariant, bool]]:
    """(variant, is the product's default) for one index kind: the default, then the sweep."""
    default = legs.SemanticVariant.from_settings(settings, index)
    out = [(default, True)]
    keys = ["ef_search_min", "scan_order", "max_scan_tuples"] + (
        ["overfetch"] if index == "binary" else [])
    values = [sweep.get(k) or [getattr(default, k)] for k in keys]
    for combo in itertools.product(*values):
        variant = legs.SemanticVariant(default.index, **dict(zip(keys, combo, strict=True)))
        if variant != default:
            out.append((variant, False))
    return out


def _dir_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 2**20


def _build(url: str, model: RegisteredModel, kind: str, m: int, efc: int, mem: str
           ) -> tuple[float, float]:
    """Build one index as the product does; returns (seconds, MB)."""
    started = time.perf_counter()
    ensure_index(url, model, 1, kind, m=m, ef_construction=efc, build_mem=mem)
    seconds = time.perf_counter() - started
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_relation_size(%s::regclass)",
                           (index_name(model.id, 1, kind),)).fetchone()
    return seconds, (int(row[0]) if row else 0) / 2**20


def _index_scans(url: str, name: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT coalesce(sum(idx_scan), 0) FROM pg_stat_user_indexes"
                           " WHERE indexrelname = %s", (name,)).fetchone()
    return int(row[0]) if row else 0


class ScaleRun:
    """One run of the part: the source, the knobs, and the report rows."""

    def __init__(self, ctx: BenchContext) -> None:
        ex = ctx.extras
        self.settings = ctx.settings
        self.dump = Path(ex.get("dump") or DEFAULT_DUMP)
        self.sizes = list(ex.get("posts") or (QUICK_SIZES if ctx.quick else FULL_SIZES))
        self.share = float(ex.get("private_share", 0.5))
        # --keyword-only: no vectors at all (the keyword leg needs none).
        self.dims = [] if ex.get("keyword_only") else list(ex.get("dims") or DIMS)
        # The keyword leg also timed with these word limits (the settings' one is the default).
        self.keyword_words = [w for w in ex.get("keyword_max_words") or []
                              if w != self.settings.keyword_max_words]
        self.builds = list(ex.get("hnsw") or [(self.settings.hnsw_m,
                                               self.settings.hnsw_ef_construction)])
        self.sweep: dict[str, list[Any]] = dict(ex.get("sweep") or {})
        self.hybrid = bool(ex.get("hybrid", True))
        self.kinds = list(ex.get("indexes") or ("halfvec", "binary"))
        # --alt-index: an HNSW library beside pgvector on the same vectors (scale_alt.py).
        self.alts = list(ex.get("alt_indexes") or [])
        self.alt_ef = list(ex.get("alt_ef") or alt.DEFAULT_EF)
        # "all": a vector for every post, private ones too (the public filter's worst case);
        # "public": only the public posts', as the sidecar's own backfill stores them.
        self.vectors = str(ex.get("vectors") or "all")
        self.post_k = self.settings.post_candidates
        self.report = ScaleReport(ctx.out_dir.parent if ctx.out_dir.name == "scale"
                                  else ctx.out_dir, {"dump": str(self.dump), "notes": []})

    def run(self) -> list[BenchTable]:
        """Every size in turn."""
        t0 = time.perf_counter()
        self.source = sv.embed_source(self.settings, self.dump, max(self.sizes))
        per = self.source.per_source
        nn = sv.nearest_cosine(self.source.seeds)
        self.sigma = sv.noise_sigma(nn)
        self.report.meta.update({
            "model": self.source.model, "source_posts": len(self.source.post_ids),
            "seeds_per_source": per, "seeds": len(self.source.seeds),
            "queries": len(self.source.query_ids), "nearest_cosine": round(nn, 4),
            "noise_sigma": round(self.sigma, 4), "embed_source_s": time.perf_counter() - t0,
            "post_k": self.post_k, "vectors": self.vectors, "sizes": {}})
        seeded = (f" and {per - 1} recombined siblings of each ({len(self.source.seeds):,} "
                  "seeds: the dump is small for the forum)") if per > 1 else ""
        self.report.meta["notes"] = [
            f"{self.dump.name}: {len(self.source.query_ids)} questions, k = {self.post_k} posts "
            "per leg; p50/p95 of the server-side time without the query embedding.",
            f"vectors: {self.source.model} vectors of the dump's {len(self.source.post_ids):,} "
            f"public posts{seeded} plus noise (copy-to-seed cosine {nn:.2f}, the seeds' median "
            "nearest-neighbour cosine); other sizes: a fixed orthonormal random projection; "
            + ("every post has a vector, private ones too (the public filter's worst case)."
               if self.vectors == "all" else "public posts only, as the backfill stores them."),
            "recall@10: semantic against the exact top 10 of the public posts; hybrid: its "
            "first page against the same pipeline over that exact list. ε-recall@10: "
            "ann-benchmarks' epsilon recall, the share of the first 10 whose cosine distance "
            "is within 1.01 x the exact 10th's (near-copies tie). * = product default.",
        ]
        admin = self.settings.database_url or embedded_postgres_url(
            self.settings.state_dir / "bench", self.settings.embedded_pg_shared_buffers)
        for n in self.sizes:
            with scratch_database(admin, "scale") as url:
                self.run_size(url, n)
        self.report.write(chart=True)
        return [self.report.table()]

    def _row(self, n: int, stage: str, run: legs.StageRun, **fields: Any) -> None:
        p50, p95 = run.percentiles()
        row = {"posts": n, "private_share": self.share, "stage": stage, "dims": None,
               "index": None, "p50_ms": p50, "p95_ms": p95, "recall_at_10": None,
               "build_s": None, "size_mb": None, "private_returned": run.private_returned,
               "queries": len(run.ms), "default": True, "vectors": self.vectors,
               "load": os.getloadavg()[0],
               **fields, **run.extra}
        self.report.add(row)
        log.info("scale %s", row)

    def run_size(self, url: str, n: int) -> None:
        """Build the forum of ``n`` posts, its keyword index, then each vector size."""
        s = self.settings
        meta: dict[str, Any] = {"load_before": os.getloadavg()[0]}
        self.report.meta["sizes"][str(n)] = meta
        t0 = started = time.perf_counter()
        upgrade(url)
        with psycopg.connect(url) as conn:
            ids, topics = import_source(conn, self.dump, s.ts_config)
        keep = np.isin(ids, self.source.post_ids)
        source = sp.Source(np.asarray(ids, dtype=np.int64)[keep],
                           np.asarray(topics, dtype=np.int64)[keep])
        plan = sp.plan_forum(source, n, self.share, seed=n)
        with psycopg.connect(url, autocommit=True) as conn:
            built = write_forum(conn, plan, source, s.ts_config)
            public_sql = count_public(conn)
        if public_sql != built.public_posts:
            raise RuntimeError(f"the sidecar counts {public_sql} public posts, the plan "
                               f"{built.public_posts}: the generated forum is not as planned")
        public = plan.public
        meta.update(forum_s=time.perf_counter() - t0, public_posts=built.public_posts,
                    topics=built.topics, private_share=round(plan.private_share, 4),
                    steps=built.timings)
        db = Database(url, min_size=1, max_size=2)
        db.open()
        s.state_dir.mkdir(parents=True, exist_ok=True)
        kw_dir = Path(tempfile.mkdtemp(prefix="scale-keyword-", dir=s.state_dir))
        try:
            t0 = time.perf_counter()
            rebuild_keyword_index(db, kw_dir, s.ts_config)
            kw_build = time.perf_counter() - t0
            index = KeywordIndex(db, kw_dir, s.ts_config)
            texts = self.source.query_texts
            kw_run, self.kw_hits = legs.run_keyword(db, index, s, texts, public, self.post_k,
                                                    warm=len(texts))
            self._row(n, "keyword", kw_run, index="tantivy", build_s=kw_build,
                      size_mb=_dir_mb(kw_dir),
                      config={"max_words": s.keyword_max_words})
            for words in self.keyword_words:
                run, _ = legs.run_keyword(db, index, s.model_copy(
                    update={"keyword_max_words": words}), texts, public, self.post_k,
                    warm=legs.WARMUP)
                self._row(n, "keyword", run, index="tantivy", default=False,
                          config={"max_words": words})
            base_rows = seeds.seed_rows(
                self.source.rows_of(source.post_ids[plan.post_src].tolist()),
                self.source.per_source, seed=n)
            for dims in self.dims:
                t0 = time.perf_counter()
                self.run_dims(url, db, index, n, dims, plan, base_rows)
                meta[f"dims_{dims}_s"] = time.perf_counter() - t0
                meta[f"done_{dims}_s"] = time.perf_counter() - started  # since the size began
            index.close()
        finally:
            db.close()
            shutil.rmtree(kw_dir, ignore_errors=True)
        meta["load_after"] = os.getloadavg()[0]
        meta["size_s"] = time.perf_counter() - started
        self.report.write(chart=True)

    def run_dims(self, url: str, db: Database, index: KeywordIndex, n: int, dims: int,
                 plan: sp.ForumPlan, base_rows: np.ndarray) -> None:
        """Vectors of one size, then each index build, its search variants and the hybrid."""
        s, meta = self.settings, self.report.meta["sizes"][str(n)]
        public = plan.public
        name = self.source.model if dims == self.source.vectors.shape[1] \
            else f"{self.source.model}-proj{dims}"
        t0 = time.perf_counter()
        with db.connection() as conn:
            model = register_model(conn, name=name, dimensions=dims, version=1)
        with psycopg.connect(url, autocommit=True) as conn:
            data = sv.load_vectors(conn, model, sv.post_vectors(
                self.source.seeds, base_rows, dims, self.sigma, seed=n),
                only=public if self.vectors == "public" else None)
            conn.execute("VACUUM ANALYZE ai_posts_embeddings")
        meta[f"vectors_{dims}_s"] = time.perf_counter() - t0
        queries = sv.to_dims(self.source.query_vectors, dims)
        t0 = time.perf_counter()
        exact_ids, exact_sims = sv.exact_public_top_k(data, public, queries, self.post_k)
        meta[f"exact_{dims}_s"] = time.perf_counter() - t0
        mem = s.index_build_mem or f"{max(256, min(8192, 2 * data.nbytes // 2**20))}MB"
        truth = [[int(i) for i, v in zip(ids, sims, strict=True) if np.isfinite(v)]
                 for ids, sims in zip(exact_ids, exact_sims, strict=True)]
        for kind in self.alts:
            self.run_alt(db, n, dims, kind, data, public, queries, truth, exact_sims)
        del data
        texts = self.source.query_texts
        for (m, efc), kind in itertools.product(self.builds, self.kinds):
            build_s, size_mb = _build(url, model, kind, m, efc, mem)
            default_build = (m, efc) == (s.hnsw_m, s.hnsw_ef_construction)
            iname = index_name(model.id, 1, kind)
            for number, (variant, default) in enumerate(_variants(s, kind, self.sweep)):
                before = _index_scans(url, iname)
                sem = legs.run_semantic(db, model, variant, queries, public, self.post_k,
                                        warm=len(texts) if number == 0 else legs.WARMUP)
                used = _index_scans(url, iname) - before
                self._row(n, "semantic", sem, dims=dims, index=kind,
                          recall_at_10=legs.recall(sem.found, truth),
                          recall_at_100=round(legs.recall(sem.found, truth, self.post_k), 4),
                          # Misses spread thinly, or whole questions lost (a graph cut off)?
                          recall_at_10_by_query=[round(r, 2) for r in legs.recalls(
                              sem.found, truth)],
                          epsilon_recall_at_10=round(
                              legs.epsilon_recall(sem.scores, exact_sims), 4),
                          build_s=build_s,
                          size_mb=size_mb, default=default and default_build,
                          config={"m": m, "ef_construction": efc, **variant.describe()},
                          index_used=used > 0)
            if self.hybrid:
                variant = legs.SemanticVariant.from_settings(s, kind)
                served = variant.settings(s)
                reference = legs.hybrid_reference(served, self.kw_hits, exact_ids, exact_sims,
                                                  plan.post_topic, self.post_k)
                # The served pipeline, then the same with its legs in turn (the baseline of
                # SIDECAR_PARALLEL_LEGS), side by side.
                for parallel in (served.parallel_legs, not served.parallel_legs):
                    hyb = legs.run_hybrid(db, model,
                                          served.model_copy(update={"parallel_legs": parallel}),
                                          index, texts, queries, public, warm=legs.WARMUP)
                    self._row(n, "hybrid", hyb, dims=dims, index=kind,
                              recall_at_10=legs.recall(hyb.found, reference),
                              default=default_build and parallel == served.parallel_legs,
                              config={"m": m, "ef_construction": efc, **variant.describe(),
                                      "parallel_legs": parallel})
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f'DROP INDEX "{iname}"')
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("TRUNCATE ai_posts_embeddings")

    def run_alt(self, db: Database, n: int, dims: int, kind: str, data: np.ndarray,
                public: np.ndarray, queries: np.ndarray, truth: list[list[int]],
                exact_sims: np.ndarray) -> None:
        """The alternative index on the same public vectors, at each search effort."""
        s = self.settings
        built = alt.build(kind, data, public, m=s.hnsw_m, ef_construction=s.hnsw_ef_construction)
        for number, ef in enumerate(self.alt_ef):
            run = alt.run(db, built, queries, public, self.post_k, ef,
                          warm=len(queries) if number == 0 else legs.WARMUP)
            self._row(n, "semantic", run, dims=dims, index=kind,
                      recall_at_10=legs.recall(run.found, truth),
                      recall_at_100=round(legs.recall(run.found, truth, self.post_k), 4),
                      epsilon_recall_at_10=round(legs.epsilon_recall(run.scores, exact_sims), 4),
                      build_s=built.build_s, size_mb=built.size_mb, default=False,
                      config={"m": s.hnsw_m, "ef_construction": s.hnsw_ef_construction,
                              "ef_search": ef, "library": kind})
        del built


def run(ctx: BenchContext) -> list[BenchTable]:
    """The part's entry point (``sidecar bench --part scale``)."""
    return ScaleRun(ctx).run()
