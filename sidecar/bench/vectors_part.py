"""Vector search at scale: HNSW (halfvec cosine) vs binary-quantized HNSW + exact re-rank vs
an exact scan, on clustered synthetic vectors of 1,024 (bge-m3) and 384 (MiniLM) dimensions.

Everything runs in a scratch database (dropped at the end) on the configured server, or on an
embedded PostgreSQL under ``<state_dir>/bench/``. Recall@10 is measured against the exact
nearest neighbours of held-out queries (computed with numpy on the stored float16 values), and
latency is the client's wall time for one query, ``p50``/``p95`` over the queries.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import psycopg
from pgvector import HalfVector
from pgvector.psycopg import register_vector
from psycopg import sql

from sidecar.bench import vecdata
from sidecar.bench.report import BenchContext, BenchTable
from sidecar.bench.scratch import scratch_database
from sidecar.db.migrate import ensure_pgvector
from sidecar.runtime.services import embedded_postgres_url

log = logging.getLogger(__name__)

FULL_VECTORS, QUICK_VECTORS = 300_000, 20_000
FULL_QUERIES, QUICK_QUERIES = 200, 50
EXACT_QUERIES = 30  # the exact scan is slow: fewer timed queries
EF_SEARCH = (40, 100, 200)
HNSW_M, HNSW_EF_CONSTRUCTION = 16, 64  # pgvector's defaults, which the sidecar's indexes use
BINARY_OVERFETCH = (4, 10)  # candidates = 10 x overfetch, re-ranked exactly
K = 10
WARMUP = 10
TOAST_THRESHOLD = 2032  # bytes: PostgreSQL's TOAST_TUPLE_THRESHOLD with 8 kB pages


@dataclass
class Method:
    """One way to answer a query, and the index it needs."""

    name: str
    index: str | None  # index name (None: exact scan)
    ef_search: int | None
    candidates: int | None
    query: sql.Composed


def _load(conn: psycopg.Connection[Any], table: str, dims: int, n: int, seed: int
          ) -> tuple[vecdata.ClusteredSphere, np.ndarray, float]:
    """Create and fill the table by binary COPY; returns the generator, the data, the seconds."""
    space = vecdata.ClusteredSphere(dims, n, seed=seed)
    conn.execute(sql.SQL("CREATE TABLE {} (id int4 NOT NULL, embedding halfvec({}) NOT NULL)")
                 .format(sql.Identifier(table), sql.Literal(dims)))
    # As the sidecar's own table (migration 0005): each vector kept in its row.
    conn.execute(sql.SQL("ALTER TABLE {} ALTER COLUMN embedding SET STORAGE MAIN").format(
        sql.Identifier(table)))
    blocks = []
    started = time.perf_counter()
    with conn.cursor() as cur, cur.copy(
        sql.SQL("COPY {} (id, embedding) FROM STDIN (FORMAT BINARY)").format(
            sql.Identifier(table))
    ) as copy:
        copy.write(vecdata.COPY_HEADER)
        for first, block in space.chunks(n):
            copy.write(vecdata.copy_binary_rows(first, block))
            blocks.append(block)
        copy.write(vecdata.COPY_TRAILER)
    conn.commit()
    seconds = time.perf_counter() - started
    conn.execute(sql.SQL("VACUUM ANALYZE {}").format(sql.Identifier(table)))
    return space, np.concatenate(blocks), seconds


def _build(conn: psycopg.Connection[Any], name: str, ddl: sql.Composed, mem: str
           ) -> tuple[float, int]:
    conn.execute("SELECT set_config('maintenance_work_mem', %s, false)", (mem,))
    # Leader + workers = the machine's cores: the build is CPU-bound.
    workers = max(0, (os.cpu_count() or 1) - 1)
    conn.execute("SELECT set_config('max_parallel_maintenance_workers', %s, false)",
                 (str(workers),))
    started = time.perf_counter()
    conn.execute(ddl)
    seconds = time.perf_counter() - started
    row = conn.execute("SELECT pg_relation_size(%s::regclass)", (name,)).fetchone()
    return seconds, int(row[0]) if row else 0


def _bit_ddl(table: str, dims: int) -> sql.Composed:
    return sql.SQL(
        "CREATE INDEX {} ON {} USING hnsw ((binary_quantize(embedding)::bit({}))"
        " bit_hamming_ops) WITH (m = {}, ef_construction = {})").format(
        sql.Identifier(f"{table}_bit"), sql.Identifier(table), sql.Literal(dims),
        sql.Literal(HNSW_M), sql.Literal(HNSW_EF_CONSTRUCTION))


def _methods(table: str, dims: int) -> list[Method]:
    t, d = sql.Identifier(table), sql.Literal(dims)
    cosine = sql.SQL("SELECT id FROM {t} ORDER BY embedding <=> %(q)s::halfvec({d}) LIMIT {k}"
                     ).format(t=t, d=d, k=sql.Literal(K))
    binary = sql.SQL(
        "SELECT id FROM (SELECT id, embedding FROM {t}"
        " ORDER BY binary_quantize(embedding)::bit({d})"
        " <~> binary_quantize(%(q)s::halfvec({d}))::bit({d}) LIMIT %(fetch)s) c"
        " ORDER BY embedding <=> %(q)s::halfvec({d}) LIMIT {k}"
    ).format(t=t, d=d, k=sql.Literal(K))
    out = [Method("exact scan", None, None, None, cosine)]
    out += [Method("HNSW halfvec cosine", f"{table}_cos", ef, None, cosine) for ef in EF_SEARCH]
    for over in BINARY_OVERFETCH:
        fetch = K * over
        out += [Method(f"binary HNSW x{over} + re-rank", f"{table}_bit", ef, fetch, binary)
                for ef in EF_SEARCH if ef >= fetch]
    return out


def _plan_uses(conn: psycopg.Connection[Any], method: Method, q: HalfVector) -> bool:
    rows = conn.execute(sql.SQL("EXPLAIN ") + method.query,
                        {"q": q, "fetch": method.candidates}).fetchall()
    plan = "\n".join(r[0] for r in rows)
    return (method.index in plan) if method.index else ("Index" not in plan)


def _configure(conn: psycopg.Connection[Any], method: Method) -> None:
    conn.execute("SELECT set_config('hnsw.ef_search', %s, false)",
                 (str(method.ef_search or 40),))
    # Each method is one access path, forced: on a small table the planner may prefer a
    # sequential scan to an HNSW scan with a large ef_search.
    exact = method.index is None
    for name in ("enable_indexscan", "enable_bitmapscan"):
        conn.execute("SELECT set_config(%s, %s, false)", (name, "off" if exact else "on"))
    conn.execute("SELECT set_config('enable_seqscan', %s, false)", ("on" if exact else "off",))


def _time_queries(conn: psycopg.Connection[Any], method: Method, queries: list[HalfVector]
                  ) -> tuple[list[list[int]], list[float]]:
    params: Callable[[HalfVector], dict[str, Any]] = lambda q: {  # noqa: E731
        "q": q, "fetch": method.candidates}
    # Warm the caches; the exact scan reads the whole table each time, so less of it.
    for q in queries[: WARMUP if method.index else 3]:
        conn.execute(method.query, params(q)).fetchall()
    found: list[list[int]] = []
    ms: list[float] = []
    for q in queries:
        started = time.perf_counter()
        result = conn.execute(method.query, params(q)).fetchall()
        ms.append((time.perf_counter() - started) * 1000)
        found.append([r[0] for r in result])
    return found, ms


def bench_dims(url: str, dims: int, n: int, n_queries: int, seed: int = 0
               ) -> tuple[BenchTable, dict[str, Any]]:
    """Load, index and query ``n`` vectors of ``dims`` dimensions."""
    table = f"items_{dims}"
    raw: dict[str, Any] = {"dims": dims, "vectors": n, "queries": n_queries}
    pgvector = ""
    with psycopg.connect(url, autocommit=True) as conn:
        pgvector = ensure_pgvector(conn)
        register_vector(conn)
        conn.execute("SET jit = off")  # JIT compile time would land on the exact scan only
        space, data, load_s = _load(conn, table, dims, n, seed)
        queries16 = space.sample(n_queries, seed=10_000)  # held out: never inserted
        truth = vecdata.exact_top_k(data, queries16, K)
        del data
        # The graph must fit in maintenance_work_mem or the build crawls: ~2x the table.
        row = conn.execute(
            "SELECT pg_table_size(c.oid), coalesce(pg_table_size(nullif(c.reltoastrelid, 0)), 0)"
            " FROM pg_class c WHERE c.oid = %s::regclass", (table,)).fetchone()
        table_bytes, toast_bytes = (int(row[0]), int(row[1])) if row else (0, 0)
        mem = f"{max(256, min(8192, 2 * table_bytes // 2**20))}MB"
        builds = {
            f"{table}_cos": _build(conn, f"{table}_cos", sql.SQL(
                "CREATE INDEX {} ON {} USING hnsw (embedding halfvec_cosine_ops)"
                " WITH (m = {}, ef_construction = {})").format(
                sql.Identifier(f"{table}_cos"), sql.Identifier(table),
                sql.Literal(HNSW_M), sql.Literal(HNSW_EF_CONSTRUCTION)), mem),
            f"{table}_bit": _build(conn, f"{table}_bit", _bit_ddl(table, dims), mem),
        }
        methods = _methods(table, dims)
        if dims * 2 + 8 > TOAST_THRESHOLD:
            # The baseline, side by side: the same rows with halfvec's default storage, which
            # moves a vector of this size out of line (what the sidecar did before 0005).
            outside = f"{table}_ext"
            for step in ("CREATE TABLE {t} (LIKE {s})",
                         "ALTER TABLE {t} ALTER COLUMN embedding SET STORAGE EXTERNAL",
                         "INSERT INTO {t} SELECT * FROM {s}", "VACUUM ANALYZE {t}"):
                conn.execute(sql.SQL(step).format(t=sql.Identifier(outside),
                                                  s=sql.Identifier(table)))
            builds[f"{outside}_bit"] = _build(conn, f"{outside}_bit",
                                              _bit_ddl(outside, dims), mem)
            methods += [replace(m, name=f"{m.name}, vector out of line")
                        for m in _methods(outside, dims)
                        if m.index is None or (m.candidates and m.ef_search == 100)]
        conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(table)))
        queries = [HalfVector(q.astype(np.float32)) for q in queries16]
        rows: list[list[Any]] = []
        notes = [f"{n:,} vectors x {dims} dims (halfvec), clustered (mixture of Gaussians on "
                 f"the sphere); {n_queries} held-out queries; k={K}; HNSW m={HNSW_M}, "
                 f"ef_construction={HNSW_EF_CONSTRUCTION}; maintenance_work_mem={mem}; "
                 f"pgvector {pgvector}.",
                 f"binary COPY load: {load_s:.1f} s ({n / load_s:,.0f} vectors/s); table "
                 f"{table_bytes / 2**20:,.0f} MB, of which TOAST {toast_bytes / 2**20:,.0f} MB "
                 "(vectors kept in their rows, storage MAIN, as the sidecar's table; rows "
                 "marked 'out of line': a copy with halfvec's default storage, EXTERNAL)."]
        raw["load_s"] = load_s
        raw["table_bytes"] = table_bytes
        raw["toast_bytes"] = toast_bytes
        raw["methods"] = []
        for method in methods:
            subset = queries[:EXACT_QUERIES] if method.index is None else queries
            _configure(conn, method)
            if not _plan_uses(conn, method, subset[0]):
                notes.append(f"{method.name} (ef {method.ef_search}): the planner did not use "
                             "the expected plan; its numbers are not comparable")
            found, ms = _time_queries(conn, method, subset)
            recall = vecdata.recall_at_k(found, truth[: len(found)], K)
            build_s, size = builds.get(method.index or "", (None, None))
            p50, p95 = (float(v) for v in np.percentile(ms, [50, 95]))
            rows.append([method.name, method.ef_search, method.candidates,
                         None if build_s is None else round(build_s, 1),
                         None if size is None else round(size / 2**20, 1),
                         round(recall, 4), round(p50, 2), round(p95, 2)])
            raw["methods"].append({"method": method.name, "ef_search": method.ef_search,
                                   "candidates": method.candidates, "build_s": build_s,
                                   "index_bytes": size, "recall@10": recall,
                                   "queries": len(subset), "ms": ms})
        notes.append(f"exact scan timed on {min(EXACT_QUERIES, n_queries)} queries (parallel "
                     "sequential scan); its recall is the check of the numpy ground truth.")
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}, {}").format(
            sql.Identifier(table), sql.Identifier(f"{table}_ext")))
    title = f"Vector search: {n:,} x {dims} dims"
    columns = ["method", "ef_search", "candidates", "build s", "index MB", "recall@10",
               "p50 ms", "p95 ms"]
    return BenchTable("vectors", title, columns, rows, notes), raw


def run(ctx: BenchContext) -> list[BenchTable]:
    """Both dimensions, full size or ``--quick`` (20,000 vectors)."""
    n = QUICK_VECTORS if ctx.quick else FULL_VECTORS
    n_queries = QUICK_QUERIES if ctx.quick else FULL_QUERIES
    n = int(ctx.extras.get("vectors", n))
    admin = ctx.settings.database_url or embedded_postgres_url(
        ctx.settings.state_dir / "bench", ctx.settings.embedded_pg_shared_buffers)
    tables: list[BenchTable] = []
    raw: list[dict[str, Any]] = []
    with scratch_database(admin, "vectors") as url:
        for dims in ctx.extras.get("dims", (1024, 384)):
            started = time.perf_counter()
            table, data = bench_dims(url, dims, n, n_queries)
            table.notes.append(f"part time: {time.perf_counter() - started:.0f} s")
            tables.append(table)
            raw.append(data)

    (ctx.out_dir / "vectors.json").write_text(json.dumps(raw, indent=1, default=float))
    return tables
