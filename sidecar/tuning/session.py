"""Where `sidecar tune` gets its forum and judgements, and what it writes.

- ``--dump DIR``: an evaluation dump (forum + qrels), imported and embedded once into a database
  of its own exactly as `sidecar eval` does (the same state is reused by both);
- otherwise the forum the sidecar serves, with the judgements it already holds: moderators'
  labels and Discourse's search log.
"""

from __future__ import annotations

import logging
import secrets
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from models.protocols import Embedder
from sidecar.config.settings import Settings
from sidecar.db.judgements_read import click_judgements, label_judgements
from sidecar.evaluation.dataset import judgements_digest, load_dataset
from sidecar.evaluation.query_cache import CachedQueryEmbedder
from sidecar.evaluation.state import prepare_state
from sidecar.runtime.bootstrap import sync_keyword
from sidecar.runtime.resources import Resources, start_resources
from sidecar.search.profile import settings_config
from sidecar.search.profile_schema import SearchProfile
from sidecar.search.service import SearchService
from sidecar.tuning import judgements as jm
from sidecar.tuning.scoring import LegCache, keyword_rank, score_table
from sidecar.tuning.space import candidates as candidate_space
from sidecar.tuning.tune import (
    MIN_QUERIES,
    check_enough,
    profile_of,
    reference_candidates,
    report,
    tune,
)

log = logging.getLogger(__name__)


def forum_judgements(res: Resources, sources: Sequence[str]) -> list[jm.Judged]:
    """Moderator labels and search-log clicks of the served forum (those asked for)."""
    out: list[jm.Judged] = []
    with res.db.connection() as conn:
        if "labels" in sources:
            out += jm.from_labels(label_judgements(conn))
        if "search_log" in sources:
            out += jm.from_clicks(click_judgements(
                conn, min_members=res.settings.click_min_members))
    return out


def leg_cache(res: Resources) -> LegCache:
    """The product's search over these resources, with query vectors cached."""
    service = SearchService(res.db, CachedQueryEmbedder(res.embedder), res.model, res.settings,
                            iterative_scan=res.search.iterative_scan,
                            keyword=res.search.keyword)
    return LegCache(service=service, strategy=res.settings.strategy)


def run_tune(
    settings: Settings, *, dump: Path | None, sources: Sequence[str] = jm.SOURCES,
    folds: int = 5, seed: int | None = None, resamples: int = 10_000,
    min_queries: int = MIN_QUERIES,
    query_fields: str = "text", progress: bool = True, embedder: Embedder | None = None,
    scores_out: Path | None = None,
) -> tuple[dict[str, Any], SearchProfile]:
    """Tune on a dump or on the served forum; returns the report and the profile to serve.

    ``embedder`` replaces the configured model (tests pass the one they already loaded);
    ``scores_out`` keeps every candidate's per-query scores (an .npz file) for audit. ``seed``
    draws the folds; None (the command's default) draws a fresh one, recorded in the report,
    so that nobody can know in advance which judged queries a run holds out.
    """
    started = time.perf_counter()
    seed = secrets.randbits(31) if seed is None else seed
    meta: dict[str, Any] = {"command": "sidecar tune " + " ".join(sys.argv[2:]),
                            "date": datetime.now(UTC).isoformat(timespec="seconds"),
                            "folds": folds, "seed": seed, "resamples": resamples,
                            "min_queries": min_queries, "sources": list(sources)}
    if dump is not None:
        dataset = load_dataset(dump.resolve(), query_fields)
        state = prepare_state(settings, dump.resolve(), strategies=(settings.strategy,),
                              index_kinds=(settings.index_kind,), progress=progress,
                              embedder=embedder)
        res = state.resources
        meta.update(dump=str(dump), database=state.database, query_fields=query_fields,
                    judgements_digest=judgements_digest(dump.resolve()))
        queries = jm.from_dataset(dataset) if "qrels" in sources else []
        queries += forum_judgements(res, [s for s in sources if s != "qrels"])
    else:
        res = start_resources(settings, embedder=embedder)
        sync_keyword(res)  # this node's keyword index, up to date (built if missing)
        meta.update(forum="served")
        queries = forum_judgements(res, sources)
    try:
        meta["model"] = res.model.name
        meta["strategy"] = settings.strategy
        check_enough(queries, min_queries)
        cache = leg_cache(res)
        queries = jm.with_propensity(queries, lambda q, t: keyword_rank(cache, q, t))
        space = candidate_space()
        references = reference_candidates(settings_config(settings), space)
        table = score_table(cache, space, queries, progress=progress)
        if scores_out is not None:
            table.save(scores_out)
        result = tune(table, references, folds=folds, seed=seed, resamples=resamples)
        meta["duration_s"] = round(time.perf_counter() - started, 1)
        doc = report(result, meta=meta)
        return doc, profile_of(result, doc, model=res.model.name, strategy=settings.strategy)
    finally:
        res.close()
