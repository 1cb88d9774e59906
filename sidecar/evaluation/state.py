"""The evaluation's own state: a database per dump, imported and embedded once, then reused.

The forum of an evaluation dump never goes near the forum's database. Without ``DATABASE_URL``
it lives in an embedded PostgreSQL under ``<state_dir>/eval/``; with ``DATABASE_URL`` it lives in
a database of its own on that server (``sidecar_eval_<hash>``, created on first use). Either way
the database is named after the dump's content and the text search configuration, and markers in
``sidecar_meta`` record what was imported and embedded, so an unchanged dump, model and strategy
reuse everything (seconds) and a changed one is imported and embedded again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo

from models.protocols import Embedder, Reranker
from sidecar.config.settings import Settings
from sidecar.core.strategy import STRATEGY_VERSIONS
from sidecar.db.embeddings import count_embeddings
from sidecar.db.forum_read import forum_counts
from sidecar.db.meta import create_database, get_meta, set_meta
from sidecar.db.vector_index import ensure_index
from sidecar.errors import ConfigurationError, InvalidInput
from sidecar.evaluation.dataset import forum_digest
from sidecar.ingest.importer import import_dump
from sidecar.runtime.bootstrap import backfill_sync, sync_keyword
from sidecar.runtime.model_setup import ensure_model
from sidecar.runtime.resources import Resources, start_resources
from sidecar.runtime.services import embedded_postgres_url

log = logging.getLogger(__name__)

IMPORT_MARKER = "eval:imported"
REJECTED_MARKER = "eval:rejected"  # the rows the import rejected (JSON list), kept for reuse
SHOWN_REJECTED = 20  # rejected rows named in the error


class DumpRejected(InvalidInput):
    """The dump's import rejected rows, or left no public post to evaluate on."""


def _check_rejected(errors: list[str], dump: Path, allow_rejected: bool) -> None:
    if not errors or allow_rejected:
        return
    shown = "\n".join(f"  {e}" for e in errors[:SHOWN_REJECTED])
    more = f"\n  ... and {len(errors) - SHOWN_REJECTED} more" if len(errors) > SHOWN_REJECTED \
        else ""
    raise DumpRejected(
        f"the import of {dump} rejected {len(errors)} rows; metrics over what is left would "
        f"mislead. Fix the dump, or pass --allow-rejected to evaluate on the rest:\n"
        f"{shown}{more}"
    )


class StateNotReady(Exception):
    """Raised by ``prepare_state(build=False)`` when the dump is not imported and embedded yet."""


def embed_marker(model_id: int, strategy: int) -> str:
    """The sidecar_meta key recording a complete embedding of (model, strategy)."""
    return f"eval:embedded:{model_id}:{strategy}"


def database_name(digest: str, ts_config: str) -> str:
    """The evaluation database of a dump: its content and text search configuration."""
    return "sidecar_eval_" + hashlib.sha256(f"{digest}:{ts_config}".encode()).hexdigest()[:16]


def model_identity(embedder: Embedder) -> str:
    """What identifies the model's vectors: its checksum when it has a manifest."""
    manifest = getattr(embedder, "manifest", None)
    checksum = getattr(manifest, "checksum", None)
    version = getattr(manifest, "version", 1)
    return f"{embedder.name}:{embedder.dimensions}:{version}:{checksum or 'no-checksum'}"


def fingerprint(digest: str, model: str, strategy: int, ts_config: str) -> str:
    """Dump content + model checksum + strategy (and its version) + text search configuration."""
    key = f"{digest}|{model}|{strategy}:{STRATEGY_VERSIONS[strategy]}|{ts_config}"
    return hashlib.sha256(key.encode()).hexdigest()


@dataclass
class EvalState:
    """Resources over the evaluation database, and what preparing them did."""

    resources: Resources
    dump: Path
    database: str
    forum_digest: str
    fingerprints: dict[int, str]
    reused: bool
    timings: dict[str, float] = field(default_factory=dict)
    imported: dict[str, Any] | None = None
    embedded: dict[int, int] = field(default_factory=dict)

    @property
    def settings(self) -> Settings:
        """The settings the evaluation runs with (its own database)."""
        return self.resources.settings

    def close(self) -> None:
        """Release the pool (embedded servers stop with the process)."""
        self.resources.close()


def _ensure_database(admin_url: str, name: str) -> str:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        try:
            created = create_database(conn, name)
        except psycopg.errors.InsufficientPrivilege as exc:
            raise ConfigurationError(
                f"cannot create the evaluation database {name}: the DATABASE_URL role lacks "
                "CREATEDB. Grant it, create the database yourself, or unset DATABASE_URL to "
                "evaluate in an embedded PostgreSQL."
            ) from exc
    if created:
        log.info("created the evaluation database %s", name)
    return make_conninfo(admin_url, dbname=name)


def _marker(res: Resources, key: str) -> str | None:
    with res.db.connection() as conn:
        return get_meta(conn, key)


def _set_marker(res: Resources, key: str, value: str) -> None:
    with res.db.connection() as conn:
        set_meta(conn, key, value)


def eval_settings(settings: Settings, database_url: str) -> Settings:
    """The evaluation's settings: its own database and state directory, the same models."""
    return settings.model_copy(update={
        "database_url": database_url,
        "state_dir": settings.state_dir / "eval",
        # Pinned before state_dir moves: the models stay where the operator prepared them.
        "embed_model_path": settings.embed_dir(),
        "rerank_model_path": settings.rerank_dir(),
        # ... and so does the search profile: the evaluation measures what the forum serves.
        "search_profile": settings.profile_path(),
        "load_demo": False,
    })


def prepare_state(
    settings: Settings,
    dump: Path,
    *,
    strategies: Iterable[int] = (1,),
    index_kinds: Iterable[str] = ("halfvec",),
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    progress: bool = True,
    build: bool = True,
    allow_rejected: bool = False,
) -> EvalState:
    """Open (creating, importing and embedding as needed) the evaluation state of a dump.

    With ``build=False`` nothing is imported or embedded: a state that would need it raises
    :class:`StateNotReady` (for callers that only want to reuse a prepared state).
    """
    started = time.perf_counter()
    strategy_list = sorted(set(strategies))
    digest = forum_digest(dump)
    admin_url = settings.database_url or embedded_postgres_url(
        settings.state_dir / "eval", settings.embedded_pg_shared_buffers)
    name = database_name(digest, settings.ts_config)
    url = _ensure_database(admin_url, name)
    if embedder is None:
        # eval_settings pins the model's folder, and a pinned folder is never prepared: a
        # fresh state directory gets its model first (as `sidecar run` would give it).
        ensure_model(settings)
    res = start_resources(eval_settings(settings, url), embedder=embedder, reranker=reranker)
    timings = {"start_s": time.perf_counter() - started}
    state = EvalState(resources=res, dump=dump, database=name, forum_digest=digest,
                      fingerprints={}, reused=True, timings=timings)
    try:
        if not build:
            _check_ready(state, strategy_list)
        _import(state, allow_rejected)
        with res.db.connection() as conn:
            if forum_counts(conn)["public_posts"] == 0:
                raise DumpRejected(f"{dump} holds no public post once imported: there is "
                                   "nothing to evaluate on")
        model = model_identity(res.embedder)
        for strategy in strategy_list:
            if strategy not in STRATEGY_VERSIONS:
                raise ConfigurationError(f"unknown strategy {strategy}")
            _embed(state, strategy, fingerprint(digest, model, strategy, settings.ts_config),
                   progress=progress)
        t0 = time.perf_counter()
        for kind in sorted(set(index_kinds)):
            for strategy in state.fingerprints:
                ensure_index(res.conninfo("index"), res.model, strategy, kind,
                             **res.settings.hnsw_build())
        timings["index_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        sync_keyword(res)  # the keyword index of this state directory (built the first time)
        timings["keyword_index_s"] = time.perf_counter() - t0
    except BaseException:
        res.close()
        raise
    timings["total_s"] = time.perf_counter() - started
    return state


def _check_ready(state: EvalState, strategies: Iterable[int]) -> None:
    res = state.resources
    model = model_identity(res.embedder)
    if _marker(res, IMPORT_MARKER) != state.forum_digest:
        raise StateNotReady(f"{state.dump} is not imported in {state.database}")
    for strategy in strategies:
        wanted = fingerprint(state.forum_digest, model, strategy, res.settings.ts_config)
        if _marker(res, embed_marker(res.model.id, strategy)) != wanted:
            raise StateNotReady(f"{state.dump} is not embedded (strategy {strategy}) with "
                                f"{res.model.name}")


def _import(state: EvalState, allow_rejected: bool) -> None:
    """Import the dump unless its content is imported already; rows the import rejects fail
    the evaluation (now, or when the state is reused) unless ``allow_rejected``."""
    res = state.resources
    if _marker(res, IMPORT_MARKER) == state.forum_digest:
        state.timings["import_s"] = 0.0
        _check_rejected(json.loads(_marker(res, REJECTED_MARKER) or "[]"), state.dump,
                        allow_rejected)
        return
    state.reused = False
    t0 = time.perf_counter()
    log.info("importing %s into %s", state.dump, state.database)
    with psycopg.connect(res.urls.database_url) as conn:
        report = import_dump(conn, state.dump, res.settings.ts_config)
        errors = [str(e) for e in report.errors]
        _check_rejected(errors, state.dump, allow_rejected)  # raising rolls the import back
    data = report.as_dict()
    data.pop("errors")
    data["rejected_rows"] = len(errors)
    state.imported = data
    _set_marker(res, REJECTED_MARKER, json.dumps(errors))
    _set_marker(res, IMPORT_MARKER, state.forum_digest)
    state.timings["import_s"] = time.perf_counter() - t0


def _embed(state: EvalState, strategy: int, print_: str, *, progress: bool) -> None:
    res = state.resources
    state.fingerprints[strategy] = print_
    key = embed_marker(res.model.id, strategy)
    t0 = time.perf_counter()
    if _marker(res, key) != print_:
        state.reused = False
        done = backfill_sync(res, strategy, progress=progress)
        log.info("strategy %d: %d embedded, %d unchanged", strategy, done.embedded,
                 done.unchanged)
        _set_marker(res, key, print_)
    with res.db.connection() as conn:
        state.embedded[strategy] = count_embeddings(conn, res.model, strategy)
    state.timings[f"embed_strategy{strategy}_s"] = time.perf_counter() - t0
