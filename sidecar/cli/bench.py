"""`sidecar bench`: the benchmark parts, side by side with their baselines, in one run."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sidecar.settings import Settings


@click.command()
@click.option("--out", type=click.Path(path_type=Path), default=Path("bench-results"),
              show_default=True, help="Folder for results.json and summary.md.")
@click.option("--part", "parts", multiple=True,
              type=click.Choice(["models", "vectors", "backfill", "e2e", "chain"]),
              help="Run only these parts (repeatable). Default: all.")
@click.option("--quick", is_flag=True, help="Small sizes: checks that every part runs.")
@click.pass_obj
def bench(settings: Settings, out: Path, parts: tuple[str, ...], quick: bool) -> None:
    """Measure speed: models, vector search at scale, backfill, end-to-end HTTP, rerank chain."""
    from sidecar.bench.runner import PARTS, run_bench

    chosen = list(parts) or list(PARTS)
    tables, summary = run_bench(settings, out, chosen, quick=quick,
                                command="sidecar bench " + " ".join(sys.argv[2:]))
    for table in tables:
        click.echo(table.to_markdown())
    click.echo(f"written: {summary}")
