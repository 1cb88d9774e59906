"""Runs the benchmark parts in one process, one after the other, and writes one report."""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sidecar.bench.report import BenchContext, BenchTable, write_report
from sidecar.config.settings import Settings
from sidecar.errors import InvalidInput
from sidecar.runtime.machine import machine

log = logging.getLogger(__name__)

# Part name -> module with `run(ctx: BenchContext) -> list[BenchTable]`.
PARTS: dict[str, str] = {
    "models": "sidecar.bench.models_part",
    "vectors": "sidecar.bench.vectors_part",
    "backfill": "sidecar.bench.backfill_part",
    "e2e": "sidecar.bench.e2e_part",
    "chain": "sidecar.bench.chain_part",
    "scale": "sidecar.bench.scale_part",
    "related": "sidecar.bench.related_part",
    "seeds": "sidecar.bench.seeds_part",
    "rerank": "sidecar.bench.rerank_part",
    "train-embedder": "sidecar.bench.train_embedder_part",
    "answer": "sidecar.bench.answer_part",
}
# What `sidecar bench` runs without --part: scale takes most of an hour at its full sizes, seeds
# checks the scale part's generator. answer takes about 80 s and is the only check of the answer
# path's 10 ms goal.
DEFAULT_PARTS: tuple[str, ...] = ("models", "vectors", "backfill", "e2e", "chain", "answer")


def load_part(name: str) -> Callable[[BenchContext], list[BenchTable]]:
    """The ``run`` function of a part."""
    if name not in PARTS:
        raise InvalidInput(f"unknown bench part {name!r}; known: {', '.join(PARTS)}")
    module = importlib.import_module(PARTS[name])
    runner: Callable[[BenchContext], list[BenchTable]] = module.run
    return runner


def run_bench(settings: Settings, out_dir: Path, parts: Sequence[str], *, quick: bool,
              command: str, extras: Mapping[str, dict[str, Any]] | None = None,
              ) -> tuple[list[BenchTable], Path]:
    """Run the parts in order; a part that fails is reported, the others still run.

    ``extras`` holds each part's own options (``BenchContext.extras``), by part name.
    """
    tables: list[BenchTable] = []
    meta: dict[str, object] = {"started": datetime.now(UTC).isoformat(timespec="seconds"),
                               "machine": machine(), "command": command, "quick": quick,
                               "parts": {}}
    for name in parts:
        started = time.perf_counter()
        ctx = BenchContext(settings=settings, out_dir=out_dir / name, quick=quick,
                           extras=dict((extras or {}).get(name, {})))
        ctx.out_dir.mkdir(parents=True, exist_ok=True)
        try:
            part_tables = load_part(name)(ctx)
            status = "done"
        except Exception as exc:  # one broken part must not hide the others' numbers
            log.exception("bench part %s failed", name)
            part_tables = [BenchTable(name, f"{name}: failed", ["error"], [[repr(exc)]])]
            status = "error"
        tables += part_tables
        meta["parts"][name] = {"status": status,  # type: ignore[index]
                               "seconds": round(time.perf_counter() - started, 1)}
    return tables, write_report(out_dir, tables, meta)
