"""`sidecar tune`: choose the served search configuration by cross-validation on judgements."""

from __future__ import annotations

import json
from pathlib import Path

import click

from sidecar.config.settings import Settings

# Deferred imports (fork safety): each command imports what it needs when it runs. Every command
# module is imported by `sidecar serve` and `sidecar model-host`, which fork gunicorn workers:
# ONNX Runtime's and numpy's thread pools must not be loaded before that fork (and every other
# command starts faster).

# Judgement sources and the refusal threshold, repeated here so that importing the CLI stays
# light (the tuner loads numpy; `sidecar model-host` forks after importing every command).
SOURCES = ("qrels", "labels", "search_log")
MIN_QUERIES = 50


@click.command("tune")
@click.option("--dump", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Tune on an evaluation dump (forum + qrels) instead of the served forum.")
@click.option("--source", "sources", multiple=True, type=click.Choice(SOURCES),
              help="Judgements to use (repeatable; default: all the forum has).")
@click.option("--folds", type=click.IntRange(min=2), default=5, show_default=True)
@click.option("--seed", type=int, default=None,
              help="Draws the cross-validation folds; default: a fresh random seed per run "
                   "(recorded in tune.json), so the held-out queries cannot be known ahead.")
@click.option("--resamples", type=click.IntRange(min=100), default=10_000, show_default=True)
@click.option("--min-queries", type=click.IntRange(min=2), default=MIN_QUERIES,
              show_default=True, help="Refuse to tune on fewer judged queries.")
@click.option("--out", type=click.Path(path_type=Path), default=Path("tune-results"),
              show_default=True,
              help="Folder for tune.json, tune.md and scores.npz (every per-query score).")
@click.option("--query", "query_fields", default="text", show_default=True,
              metavar="FIELD[+DETAILS]",
              help="With --dump: the field of queries.jsonl holding the query, optionally + "
                   "the field holding its details (as `sidecar eval --query`).")
@click.option("--dry-run", is_flag=True, help="Report only; do not write the search profile.")
@click.pass_obj
def tune_cmd(settings: Settings, dump: Path | None, sources: tuple[str, ...], folds: int,
             seed: int | None, resamples: int, min_queries: int, out: Path, query_fields: str,
             dry_run: bool) -> None:
    """Cross-validate fusion x weights x topic score on judged queries; write the profile.

    Judgements: qrels of --dump, moderators' "should have answered" labels, and Discourse's
    search_logs (clicks weighted by inverse propensity). The report holds held-out figures only.
    The profile goes to SIDECAR_SEARCH_PROFILE (default <state dir>/search-profile.json); the
    API reads it at start-up (restart or reload it to apply).
    """
    # Heavy (numpy, the models): loaded when the command runs, not when the CLI is imported.
    from sidecar.search.profile import update_profile, updated_profile
    from sidecar.tuning.render import to_markdown
    from sidecar.tuning.session import run_tune

    doc, profile = run_tune(settings, dump=dump, sources=sources or SOURCES, folds=folds,
                            seed=seed, resamples=resamples, min_queries=min_queries,
                            query_fields=query_fields, scores_out=out / "scores.npz")
    out.mkdir(parents=True, exist_ok=True)
    (out / "tune.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    text = to_markdown(doc)
    (out / "tune.md").write_text(text)
    click.echo(text)
    if dry_run:
        click.echo("dry run: no search profile written")
        return
    path = settings.profile_path()
    # Judged queries with details (`--query title+body`) tune the slot served to such queries.
    details = dump is not None and "+" in query_fields
    digest = update_profile(path, lambda: updated_profile(path, profile, details=details,
                                                          settings=settings))
    shape = "queries with details" if details else "queries"
    click.echo(f"search profile written for {shape}: {path} (sha256 {digest[:12]}); restart "
               "or reload the API to serve it")
