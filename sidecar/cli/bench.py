"""`sidecar bench`: the benchmark parts, side by side with their baselines, in one run."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from sidecar.config.settings import Settings

# Deferred imports (fork safety): each command imports what it needs when it runs (see
# sidecar/cli/main.py).


def _ints(value: str | None) -> list[int] | None:
    if not value:
        return None
    try:
        return [int(v.replace("_", "")) for v in value.split(",") if v.strip()]
    except ValueError as exc:
        raise click.BadParameter(f"expected comma-separated integers, got {value!r}") from exc


def _words(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def _builds(value: str | None) -> list[tuple[int, int]] | None:
    if not value:
        return None
    try:
        return [(int(m), int(efc)) for m, efc in (v.split(":") for v in value.split(","))]
    except ValueError as exc:
        raise click.BadParameter(f"expected M:EF_CONSTRUCTION[,...], got {value!r}") from exc


def scale_extras(dump: Path | None, posts: str | None, private_share: float, dims: str | None,
                 hnsw: str | None, ef_search: str | None, iterative_scan: str | None,
                 max_scan_tuples: str | None, overfetch: str | None, hybrid: bool,
                 vectors: str = "all", indexes: tuple[str, ...] = (),
                 keyword_max_words: str | None = None, keyword_only: bool = False,
                 alt_indexes: tuple[str, ...] = (), alt_ef: str | None = None
                 ) -> dict[str, Any]:
    """The scale part's options as ``BenchContext.extras``."""
    scans = _words(iterative_scan)
    for scan in scans or ():
        if scan not in ("strict_order", "relaxed_order", "off"):
            raise click.BadParameter(f"unknown iterative scan {scan!r}")
    sweep = {"ef_search_min": _ints(ef_search), "scan_order": scans,
             "max_scan_tuples": _ints(max_scan_tuples), "overfetch": _ints(overfetch)}
    return {"dump": dump, "posts": _ints(posts), "private_share": private_share,
            "dims": _ints(dims), "hnsw": _builds(hnsw),
            "sweep": {k: v for k, v in sweep.items() if v}, "hybrid": hybrid,
            "vectors": vectors, "indexes": list(indexes),
            "keyword_max_words": _ints(keyword_max_words) or [], "keyword_only": keyword_only,
            "alt_indexes": list(alt_indexes), "alt_ef": _ints(alt_ef)}


@click.command()
@click.option("--out", type=click.Path(path_type=Path), default=Path("bench-results"),
              show_default=True, help="Folder for results.json and summary.md.")
@click.option("--part", "parts", multiple=True,
              type=click.Choice(["models", "vectors", "backfill", "e2e", "chain", "scale",
                                 "seeds", "related", "rerank", "train-embedder", "answer"]),
              help="Run only these parts (repeatable). Default: models, vectors, backfill, "
                   "e2e, chain and answer (answer: what /v1/answer adds beyond /v1/retrieve "
                   "with a local LLM stub, and a streamed answer's time to first sanitized "
                   "byte; related: /v1/topics/<id>/related cold and warm beside /v1/search on "
                   "the scale part's forum; takes --posts, --private-share, --dims, --vectors; "
                   "rerank: the forum's reranker's training time on --dump's forum and the "
                   "latency it adds to /v1/retrieve; train-embedder: tuning the embedder on "
                   "--dump's forum, re-embedding posts/s, the night it takes).")
@click.option("--quick", is_flag=True, help="Small sizes: checks that every part runs.")
@click.option("--dump", type=click.Path(path_type=Path, exists=True, file_okay=False),
              help="scale, seeds: the dump resampled into forums; rerank: the forum trained on "
                   "(default ../shared/eval/qatarliving).")
@click.option("--train-minutes", type=click.FloatRange(min=1), default=None,
              help="rerank, train-embedder: the training budget (default 60; 5 with --quick).")
@click.option("--posts", help="scale: forum sizes, e.g. 100000,300000,1000000.")
@click.option("--private-share", type=click.FloatRange(0.0, 0.95), default=0.5,
              show_default=True, help="scale: share of the posts that are not public.")
@click.option("--dims", help="scale: vector sizes (default 384,1024).")
@click.option("--hnsw", help="scale: HNSW builds M:EF_CONSTRUCTION[,...] (default: settings).")
@click.option("--ef-search", help="scale: also try these ef_search minimums.")
@click.option("--iterative-scan", help="scale: also try strict_order,relaxed_order,off.")
@click.option("--max-scan-tuples", help="scale: also try these hnsw.max_scan_tuples.")
@click.option("--overfetch", help="scale: also try these binary over-fetch factors.")
@click.option("--no-hybrid", "hybrid", flag_value=False, default=True,
              help="scale: skip the hybrid pipeline.")
@click.option("--index", "indexes", multiple=True, type=click.Choice(["halfvec", "binary"]),
              help="scale: only these HNSW indexes (repeatable; default both).")
@click.option("--vectors", type=click.Choice(["all", "public"]), default="all",
              show_default=True,
              help="scale: vectors of every post (private too: the filter's worst case) or of "
                   "the public posts only (what the backfill stores).")
@click.option("--keyword-max-words",
              help="scale: also time the keyword leg with these word limits (0: every word).")
@click.option("--alt-index", "alt_indexes", multiple=True, type=click.Choice(["usearch"]),
              help="scale: also an HNSW library beside pgvector on the same public vectors, "
                   "followed by the same public filter in SQL (repeatable).")
@click.option("--alt-ef", help="scale: the alternative index's ef_search values "
                               "(default 100,200,400).")
@click.option("--keyword-only", is_flag=True,
              help="scale: the keyword leg only (no vectors, semantic leg or hybrid).")
@click.pass_obj
def bench(settings: Settings, out: Path, parts: tuple[str, ...], quick: bool, dump: Path | None,
          posts: str | None, private_share: float, dims: str | None, hnsw: str | None,
          ef_search: str | None, iterative_scan: str | None, max_scan_tuples: str | None,
          overfetch: str | None, hybrid: bool, indexes: tuple[str, ...], vectors: str,
          keyword_max_words: str | None, keyword_only: bool, alt_indexes: tuple[str, ...],
          alt_ef: str | None, train_minutes: float | None) -> None:
    """Measure speed: models, vector search, backfill, end-to-end HTTP, rerank chain, and
    (``--part scale``) search on forums of up to a million posts."""
    from sidecar.bench.runner import DEFAULT_PARTS, run_bench

    chosen = list(parts) or list(DEFAULT_PARTS)
    scale = scale_extras(dump, posts, private_share, dims, hnsw, ef_search, iterative_scan,
                         max_scan_tuples, overfetch, hybrid, vectors, indexes,
                         keyword_max_words, keyword_only, alt_indexes, alt_ef)
    extras = {"scale": scale, "related": scale, "seeds": {"dump": dump},
              "rerank": {"dump": dump, "train_minutes": train_minutes},
              "train-embedder": {"dump": dump, "train_minutes": train_minutes}}
    tables, summary = run_bench(settings, out, chosen, quick=quick,
                                command="sidecar bench " + " ".join(sys.argv[2:]),
                                extras=extras)
    for table in tables:
        click.echo(table.to_markdown())
    click.echo(f"written: {summary}")
