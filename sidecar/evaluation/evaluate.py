"""`sidecar eval` end to end: prepare the state, run the matrix, build the result document."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from models.protocols import Embedder, Reranker
from sidecar.config.settings import Settings
from sidecar.db.forum_read import forum_counts
from sidecar.evaluation import configs as cfg
from sidecar.evaluation.dataset import judgements_digest, load_dataset
from sidecar.evaluation.report import to_json
from sidecar.evaluation.runner import run_matrix
from sidecar.evaluation.stages import STAGES, build_stages
from sidecar.evaluation.state import EvalState, model_identity, prepare_state
from sidecar.runtime.machine import machine

log = logging.getLogger(__name__)


def run_evaluation(
    settings: Settings,
    dump: Path,
    *,
    config_names: Sequence[str] = (),
    baseline: str = cfg.DEFAULT_BASELINE,
    resamples: int = 10_000,
    seed: int = 0,
    command: str = "sidecar eval",
    progress: bool = True,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    query_fields: str = "text",
    allow_rejected: bool = False,
) -> dict[str, Any]:
    """Evaluate the configurations on a dump; returns the result document (see report).

    A dump whose import rejects rows is refused (``DumpRejected``, naming them) unless
    ``allow_rejected``; a dump with no public post is always refused.
    """
    started = time.perf_counter()
    dump = dump.resolve()
    # Fail on bad queries/qrels before any heavy work.
    dataset = load_dataset(dump, query_fields)
    # Which configurations need what is known before the state is built, except whether a
    # cross-encoder loads: select once optimistically to size the state, then for real.
    wanted = cfg.select(config_names, baseline, available_stages=STAGES)
    state = prepare_state(settings, dump, strategies=wanted.strategies,
                          index_kinds=wanted.index_kinds, embedder=embedder,
                          reranker=reranker, progress=progress,
                          allow_rejected=allow_rejected)
    try:
        res = state.resources
        stages = build_stages(res, sorted(wanted.stages))
        available = [name for name, stage in stages.items() if stage is not None]
        matrix = cfg.select(config_names, baseline, available_stages=available)
        if not config_names or cfg.SERVED in config_names:
            # Queries with details are served what the profile chose for that shape.
            config = res.profile.config_for(details=dataset.has_details)
            served = cfg.served(config, res.profile.source)
            matrix.configs.append(served)
            if dataset.has_post_qrels:  # a row per post chooser, where posts are judged
                matrix.configs += cfg.served_links(served)
        if res.reranker_error:
            for name in [c.name for c in wanted.configs if c.stages]:
                matrix.skipped.setdefault(name, f"cross-encoder failed to load: "
                                                f"{res.reranker_error}")
        log.info("running %d configurations on %d queries: %s", len(matrix.configs),
                 len(dataset.scored()), ", ".join(c.name for c in matrix.configs))
        run = run_matrix(res, dataset, matrix, stages, resamples=resamples, seed=seed,
                         progress=progress)
        meta = _meta(state, dataset_dir=dump, command=command, run_started=started,
                     resamples=resamples, seed=seed)
        meta["query_fields"] = query_fields
        meta["queries_total"] = run.n_queries
        meta["queries_scored"] = run.n_scored
        meta["query_embed_ms"] = round(run.query_embed_ms, 2)
        return to_json(run, meta, matrix.skipped)
    finally:
        state.close()


def _meta(state: EvalState, *, dataset_dir: Path, command: str, run_started: float,
          resamples: int, seed: int) -> dict[str, Any]:
    res = state.resources
    s = res.settings
    with res.db.connection() as conn:
        counts = forum_counts(conn)
    return {
        "dump": str(dataset_dir),
        "dump_name": dataset_dir.name,
        "forum_digest": state.forum_digest,
        "judgements_digest": judgements_digest(dataset_dir),
        "fingerprints": {str(k): v for k, v in state.fingerprints.items()},
        "database": state.database,
        "model": {"name": res.model.name, "dimensions": res.model.dimensions,
                  "identity": model_identity(res.embedder), "provider": res.embedder.provider},
        "reranker": res.reranker.name if res.reranker is not None else None,
        "strategies": sorted(state.fingerprints),
        "ts_config": s.ts_config,
        "pgvector": res.pgvector,
        "settings": {"post_candidates": s.post_candidates, "ef_search_min": s.ef_search_min,
                     "rrf_k": s.rrf_k, "binary_overfetch": s.binary_overfetch,
                     "rerank_candidates_min": s.rerank_candidates_min},
        "service_config": res.profile.describe(),
        "forum": counts,
        "state": {"reused": state.reused, "timings": {k: round(v, 2)
                                                      for k, v in state.timings.items()},
                  "imported": state.imported,
                  "embedded": {str(k): v for k, v in state.embedded.items()}},
        "bootstrap": {"resamples": resamples, "seed": seed, "confidence": 0.95},
        "machine": machine(),
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - run_started, 1),
        "command": command,
    }
