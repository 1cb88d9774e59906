"""How a generated forum looks to an approximate index, against a real one.

The scale part builds forums of a million posts from a dump of any size
(:mod:`sidecar.bench.scale_vectors`, :mod:`sidecar.bench.scale_seeds`). Whether its recall
figures say anything about a real forum depends on the generated vectors being as hard to
search as real ones. This part measures it on a dump large enough to hold the answer: ``n``
real posts drawn at random, against ``n`` posts generated from ``m`` other posts of the same
dump (``n / m`` copies of each, as a small dump at a million posts), both ways the scale part
can generate them:

- ``noise``: each source's own vector plus noise (sized as the scale part sizes it);
- ``recombined``: the source's recombined siblings, embedded by the model, plus noise.

For each set and the dump's questions: the median local intrinsic dimensionality (LID, the
maximum-likelihood estimate from each question's 20 nearest distances), the median relative
contrast (mean distance over nearest distance; both predict how hard a nearest-neighbour search
is), the median nearest-neighbour cosine inside the set, and the recall@10 of the product's HNSW
index (pgvector, the settings' ``m``/``ef_construction``) against an exact scan at several
``ef_search``. Several draws; each row is one set of one draw.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import psycopg
from pgvector import HalfVector
from pgvector.psycopg import register_vector

from sidecar.bench import scale_seeds as seeds
from sidecar.bench import scale_vectors as sv
from sidecar.bench import vecdata
from sidecar.bench.report import BenchContext, BenchTable
from sidecar.bench.scale_part import DEFAULT_DUMP
from sidecar.bench.scratch import scratch_database
from sidecar.runtime.services import embedded_postgres_url

# Deferred imports (heavy dependency): the evaluation state (embedded servers, the model).

F32 = npt.NDArray[np.float32]
EF_SEARCH = (10, 20, 40, 80)
LID_K = 20


def set_shape(data: F32, queries: F32) -> dict[str, float]:
    """Median LID and relative contrast of the questions, median nearest-neighbour cosine."""
    sims = queries @ data.T
    near = -np.sort(-sims, axis=1)[:, :LID_K]
    dist = np.maximum(np.sqrt(np.maximum(0.0, 2.0 - 2.0 * near)), 1e-6)
    lid = -1.0 / np.mean(np.log(dist[:, :-1] / dist[:, -1:]), axis=1)
    mean = np.sqrt(np.maximum(0.0, 2.0 - 2.0 * sims)).mean(axis=1)
    return {"lid": float(np.median(lid)), "relative_contrast": float(np.median(mean / dist[:, 0])),
            "nearest_cosine": sv.nearest_cosine(data, sample=min(1000, len(data)))}


def hnsw_recall(url: str, data: npt.NDArray[np.float16], queries: F32, m: int, efc: int
                ) -> dict[int, float]:
    """Recall@10 of a pgvector HNSW index over ``data`` against an exact scan, per ef_search."""
    exact, _ = vecdata.exact_scan(data, queries, 10)
    dims = data.shape[1]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        register_vector(conn)
        conn.execute(f"CREATE TABLE fidelity (id int PRIMARY KEY, e halfvec({dims}))")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO fidelity VALUES (%s, %s)",
                            [(i + 1, HalfVector(v)) for i, v in enumerate(data)])
        conn.execute(f"CREATE INDEX ON fidelity USING hnsw (e halfvec_cosine_ops)"
                     f" WITH (m = {m}, ef_construction = {efc})")
        out = {}
        for ef in EF_SEARCH:
            conn.execute(f"SET hnsw.ef_search = {ef}")
            hits = [[r[0] for r in conn.execute(
                f"SELECT id FROM fidelity ORDER BY e <=> %s::halfvec({dims}) LIMIT 10",
                (HalfVector(q),)).fetchall()] for q in queries]
            out[ef] = float(np.mean([len(set(h) & set(t.tolist())) / 10
                                     for h, t in zip(hits, exact, strict=True)]))
        conn.execute("DROP TABLE fidelity")
    return out


def run(ctx: BenchContext) -> list[BenchTable]:
    """The part's entry point (``sidecar bench --part seeds``)."""
    from sidecar.evaluation.dataset import load_dataset
    from sidecar.evaluation.state import prepare_state

    s = ctx.settings
    dump = Path(ctx.extras.get("dump") or DEFAULT_DUMP)
    n, m, draws = (150, 25, 1) if ctx.quick else (4000, 250, 3)
    per_source = max(2, n // m)
    dataset = load_dataset(dump)
    state = prepare_state(s, dump, progress=False)
    rows: list[dict[str, Any]] = []
    admin = s.database_url or embedded_postgres_url(s.state_dir / "bench",
                                                    s.embedded_pg_shared_buffers)
    try:
        res = state.resources
        ids, vectors, _, queries = sv.dump_vectors(res, [q.text for q in dataset.queries])
        if len(ids) < n + m:
            raise ValueError(f"{dump} has {len(ids)} embedded posts; this part needs {n + m}")
        with scratch_database(admin, "seeds") as url:
            for draw in range(draws):
                rng = np.random.default_rng(draw)
                picked = rng.permutation(len(ids))
                real, src = picked[:n], np.sort(picked[n:n + m])
                own = vectors[src]
                sibs = sv.embed_siblings(res, ids[src], own, per_source, seed=draw)
                table = seeds.interleave(own, sibs, per_source)
                source_rows = rng.integers(0, m, n)
                sets = {
                    "real": vectors[real].astype(np.float16),
                    "noise": _generate(own, source_rows, draw),
                    "recombined": _generate(table, seeds.seed_rows(source_rows, per_source,
                                                                   draw), draw),
                }
                for name, data in sets.items():
                    shape = set_shape(data.astype(np.float32), queries)
                    recall = hnsw_recall(url, data, queries, s.hnsw_m, s.hnsw_ef_construction)
                    rows.append({"draw": draw, "set": name, "posts": n,
                                 "sources": None if name == "real" else m, **shape,
                                 **{f"recall_at_10_ef{ef}": r for ef, r in recall.items()}})
    finally:
        state.close()
    (ctx.out_dir / "seeds.json").write_text(json.dumps(
        {"meta": {"dump": str(dump), "posts": n, "sources": m, "per_source": per_source,
                  "model": res.model.name, "m": s.hnsw_m,
                  "ef_construction": s.hnsw_ef_construction}, "rows": rows}, indent=2))
    columns = ["draw", "set", "LID", "relative contrast", "NN cosine"] + [
        f"recall@10 ef {ef}" for ef in EF_SEARCH]
    return [BenchTable("seeds", f"Generated forums against real posts ({dump.name}: {n} posts,"
                       f" generated from {m})", columns, [
        [r["draw"], r["set"], round(r["lid"], 1), round(r["relative_contrast"], 3),
         round(r["nearest_cosine"], 3)] + [round(r[f"recall_at_10_ef{ef}"], 3)
                                           for ef in EF_SEARCH] for r in rows],
        notes=["Lower LID, higher relative contrast and higher recall: an easier search. "
               "A faithful generator is close to the real rows, and never easier."])]


def _generate(table: F32, rows: npt.NDArray[np.int64], seed: int) -> npt.NDArray[np.float16]:
    """The scale part's copies: a table row each, plus noise sized by the table's density."""
    sigma = sv.noise_sigma(sv.nearest_cosine(table, sample=min(2000, len(table))))
    return np.concatenate([block for _, block in sv.post_vectors(
        table, rows, table.shape[1], sigma, seed)])
