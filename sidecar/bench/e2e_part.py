"""End to end over HTTP: POST /v1/search and POST /v1/retrieve (no LLM) under 1 and 8 clients.

A real ``sidecar serve`` (gunicorn, gthread workers) runs in a subprocess on a free port over the
evaluation forum (the state `sidecar eval` prepared: imported and embedded once), and threads
with httpx send the evaluation's queries. Latency is the client's wall time per request; the
mean time per stage comes from the responses' ``trace``. Without a prepared evaluation state,
``--quick`` falls back to the demo forum (topic titles as queries) instead of embedding 15k posts.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from psycopg import sql

from sidecar.bench.procs import wait_healthy
from sidecar.bench.report import BenchContext, BenchTable
from sidecar.config.settings import Settings
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE
from sidecar.evaluation.dataset import load_dataset
from sidecar.evaluation.state import EvalState, StateNotReady, prepare_state
from sidecar.runtime.bootstrap import demo_dir
from sidecar.runtime.model_setup import ensure_model

log = logging.getLogger(__name__)

DEFAULT_DUMP = Path("../shared/eval/qatarliving")
CLIENTS = (1, 8)
READY_TIMEOUT_S = 180.0
REQUEST_TIMEOUT_S = 60.0
SEARCH_LIMIT = 10

Body = Callable[[str], dict[str, Any]]


@dataclass
class LoadResult:
    """What one (endpoint, clients) run measured."""

    endpoint: str
    clients: int
    latencies_ms: list[float] = field(default_factory=list)
    errors: dict[str, int] = field(default_factory=dict)
    stages_ms: dict[str, list[float]] = field(default_factory=dict)
    wall_s: float = 0.0

    def percentile(self, q: float) -> float | None:
        """A latency percentile in ms (None without successful requests)."""
        return float(np.percentile(self.latencies_ms, q)) if self.latencies_ms else None

    @property
    def throughput(self) -> float:
        """Successful requests per second of wall time."""
        return len(self.latencies_ms) / self.wall_s if self.wall_s else 0.0


def free_port() -> int:
    """A TCP port nobody listens on now, on the loopback interface."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def serve(state: EvalState, port: int, api_key: str, log_path: Path,
          extra_env: Mapping[str, str] | None = None) -> Iterator[str]:
    """``sidecar serve`` in a subprocess over the evaluation database; yields its base URL.

    ``extra_env``: more settings (the answer part's LLM stub), applied last."""
    s = state.settings
    # The operator's SIDECAR_* knobs (provider, threads, index kind...) carry over; the LLM does
    # not (no OLLAMA_URL: retrieval without condensation), the services and models are pinned.
    env = {k: v for k, v in os.environ.items() if k not in {"OLLAMA_URL", "SIDECAR_OLLAMA_URL"}}
    env.update({
        "DATABASE_URL": state.resources.urls.database_url,
        "REDIS_URL": state.resources.urls.redis_url,
        "SIDECAR_API_KEY": api_key,
        "SIDECAR_HOST": "127.0.0.1",
        "SIDECAR_PORT": str(port),
        "SIDECAR_STATE_DIR": str(s.state_dir),
        "SIDECAR_EMBED_MODEL": s.embed_model,
        "SIDECAR_WORKERS": str(s.workers),
        "SIDECAR_THREADS": str(s.threads),
        "SIDECAR_INDEX_KIND": s.index_kind,
        "SIDECAR_LOG_LEVEL": "WARNING",
        "SIDECAR_FORUM_URL": s.forum_url or "https://forum.example.org",
    })
    for key in ("SIDECAR_DATABASE_URL", "SIDECAR_REDIS_URL"):
        env.pop(key, None)
    if s.embed_url:
        env["SIDECAR_EMBED_URL"] = s.embed_url
    else:
        env["SIDECAR_EMBED_MODEL_PATH"] = str(s.embed_dir())
    rerank = s.rerank_dir()
    if rerank is not None:
        env["SIDECAR_RERANK_MODEL_PATH"] = str(rerank)
    if s.rerank_url:
        env["SIDECAR_RERANK_URL"] = s.rerank_url
    env.update(extra_env or {})
    base = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as logfile:
        proc = subprocess.Popen(
            [sys.executable, "-c", "from sidecar.cli import main; main()", "serve"],
            env=env, stdout=logfile, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_healthy(f"{base}/v1/ready", proc, READY_TIMEOUT_S)
            yield base
        finally:
            _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)  # gunicorn's master and its workers
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def request_builders(spec: dict[str, Any]) -> dict[str, Body | None]:
    """How to call each endpoint, from the served OpenAPI description (None: not served)."""
    paths = spec.get("paths", {})
    builders: dict[str, Body | None] = {
        "/v1/search": (lambda q: {"query": q, "limit": SEARCH_LIMIT})
        if "/v1/search" in paths else None,
        "/v1/retrieve": None,
    }
    if "/v1/retrieve" in paths:
        # Single-turn: the latest message is the query, so no LLM condensation happens.
        builders["/v1/retrieve"] = lambda q: {"messages": [{"role": "user", "content": q}]}
    return builders


def run_load(base: str, api_key: str, endpoint: str, body: Body, queries: list[str],
             clients: int, requests: int) -> LoadResult:
    """``requests`` POSTs spread over ``clients`` threads, each with its own connection."""
    result = LoadResult(endpoint=endpoint, clients=clients)
    counter = itertools.count()
    lock = threading.Lock()
    headers = {"Authorization": f"Bearer {api_key}"}

    def worker() -> None:
        with httpx.Client(base_url=base, headers=headers, timeout=REQUEST_TIMEOUT_S) as client:
            while True:
                with lock:
                    i = next(counter)
                if i >= requests:
                    return
                started = time.perf_counter()
                try:
                    resp = client.post(endpoint, json=body(queries[i % len(queries)]))
                except httpx.HTTPError as exc:
                    with lock:
                        key = type(exc).__name__
                        result.errors[key] = result.errors.get(key, 0) + 1
                    continue
                ms = (time.perf_counter() - started) * 1000
                with lock:
                    if resp.status_code != 200:
                        key = str(resp.status_code)
                        result.errors[key] = result.errors.get(key, 0) + 1
                        continue
                    result.latencies_ms.append(ms)
                    for step in resp.json().get("trace", []):
                        if step.get("status") == "done":
                            result.stages_ms.setdefault(step["step"], []).append(step["ms"])

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result.wall_s = time.perf_counter() - started
    return result


def _eval_source(settings: Settings, dump: Path, quick: bool
                 ) -> tuple[EvalState, list[str], str]:
    if (dump / "queries.jsonl").is_file():
        try:
            state = prepare_state(settings, dump, build=not quick, progress=True)
            queries = [" ".join(q.text.split()) for q in load_dataset(dump).queries]
            return state, queries, f"evaluation forum {dump.name}"
        except StateNotReady as exc:
            log.warning("%s: the quick run uses the demo forum", exc)
    state = prepare_state(settings, demo_dir(), progress=False)
    with state.resources.db.connection() as conn:
        rows = conn.execute(sql.SQL(
            "SELECT DISTINCT t.id, t.title FROM posts p {joins} WHERE {public} ORDER BY t.id"
        ).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE))).fetchall()
    return state, [str(r["title"]) for r in rows], "demo forum (topic titles as queries)"


def run(ctx: BenchContext) -> list[BenchTable]:
    """Both endpoints at 1 and 8 clients."""
    ensure_model(ctx.settings)
    dump = Path(ctx.extras.get("dump", DEFAULT_DUMP))
    state, queries, source = _eval_source(ctx.settings, dump, ctx.quick)
    api_key = secrets.token_urlsafe(24)
    results: list[LoadResult] = []
    unavailable: list[str] = []
    try:
        with serve(state, free_port(), api_key, ctx.out_dir / "server.log") as base:
            headers = {"Authorization": f"Bearer {api_key}"}
            spec = httpx.get(f"{base}/v1/openapi.json", headers=headers, timeout=10).json()
            for endpoint, body in request_builders(spec).items():
                if body is None:
                    unavailable.append(endpoint)
                    continue
                for clients in CLIENTS:
                    # Full: every query at least once, and 30 requests per client at 8.
                    n = max(16, clients * 4) if ctx.quick else max(len(queries), clients * 30)
                    run_load(base, api_key, endpoint, body, queries, clients, 2 * clients)
                    results.append(run_load(base, api_key, endpoint, body, queries, clients, n))
    finally:
        state.close()
    return _tables(results, unavailable, source, ctx, state)


def _tables(results: list[LoadResult], unavailable: list[str], source: str, ctx: BenchContext,
            state: EvalState) -> list[BenchTable]:
    s = state.settings
    rows = [[r.endpoint, r.clients, len(r.latencies_ms) + sum(r.errors.values()),
             ", ".join(f"{k}: {v}" for k, v in r.errors.items()) or 0,
             _r(r.percentile(50)), _r(r.percentile(95)), _r(r.percentile(99)),
             round(r.throughput, 1)] for r in results]
    rows += [[e, "–", 0, "not served by this version", None, None, None, None]
             for e in unavailable]
    notes = [f"{source}; sidecar serve: {s.workers} gunicorn workers x {s.threads} threads; "
             "client threads on the same machine; no LLM (OLLAMA_URL unset).",
             "latency = client wall time per request, after a warm-up of 2 requests per client."]
    if state.resources.reranker is None:
        notes.append("no cross-encoder configured: /v1/retrieve scores with the bi-encoder")
    latency = BenchTable("e2e", "End to end over HTTP", [
        "endpoint", "clients", "requests", "errors", "p50 ms", "p95 ms", "p99 ms", "req/s"],
        rows, notes)
    stage_names = list(dict.fromkeys(n for r in results for n in r.stages_ms))
    stage_rows = [[r.endpoint, r.clients] + [
        _r(float(np.mean(r.stages_ms[n]))) if r.stages_ms.get(n) else None
        for n in stage_names] for r in results]
    stages = BenchTable("e2e", "End to end: mean ms per stage (from the trace)",
                        ["endpoint", "clients", *stage_names], stage_rows,
                        ["server-side stage times; the rest of the latency is HTTP, JSON and "
                         "queueing"])
    (ctx.out_dir / "e2e.json").write_text(json.dumps([{
        "endpoint": r.endpoint, "clients": r.clients, "latencies_ms": r.latencies_ms,
        "errors": r.errors, "wall_s": r.wall_s, "stages_ms": r.stages_ms} for r in results],
        indent=1))
    return [latency, stages]


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 1)
