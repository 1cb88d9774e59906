"""`sidecar run` (embedded defaults, demo forum), `sidecar serve` (production), `sidecar search`."""

from __future__ import annotations

import subprocess
import sys
import time

import click
from flask import Flask

from sidecar.api.gunicorn_config import GunicornApp, api_options
from sidecar.cli.output import echo_json
from sidecar.config.settings import Settings

# Deferred imports (fork safety): each command imports what it needs when it runs. Every command
# module is imported by `sidecar serve` and `sidecar model-host`, which fork gunicorn workers:
# ONNX Runtime's and numpy's thread pools must not be loaded before that fork (and every other
# command starts faster).


def _serve(settings: Settings, workers: int | None) -> None:
    def load() -> Flask:
        # Fork safety: runs in each worker after the fork (ONNX sessions and pools must not
        # cross it), so the app is imported here, never in gunicorn's master.
        from sidecar.api.app import create_app

        return create_app(settings)

    GunicornApp(api_options(settings, workers), load).run()


@click.command()
@click.pass_obj
def prepare(settings: Settings) -> None:
    """Prepare the model, migrate, load the demo forum and embed it; then exit."""
    from sidecar.answer.zone_calibration import ensure_zones
    from sidecar.runtime.bootstrap import backfill_sync, load_demo, sync_keyword
    from sidecar.runtime.model_setup import ensure_model
    from sidecar.runtime.resources import start_resources

    click.echo("preparing the embedding model ...")
    ensure_model(settings)
    click.echo("migrating ...")
    res = start_resources(settings)
    try:
        if settings.load_demo:
            report = load_demo(res)
            if report is not None:
                click.echo(f"demo forum: {report.topics.read} topics, {report.posts.read} posts"
                           f" ({report.posts.inserted} new, {report.posts.updated} updated)")
        done = backfill_sync(res, settings.strategy)
        click.echo(f"embeddings: {done.embedded} embedded, {done.unchanged} unchanged")
        # Answer zones from the forum's own questions, before anyone labels anything.
        sync_keyword(res)
        click.echo(ensure_zones(res))
    finally:
        res.close()


@click.command()
@click.option("--workers", type=int, default=1, show_default=True)
@click.option("--no-serve", is_flag=True, help="Prepare everything, then exit (for scripts).")
@click.pass_obj
def run(settings: Settings, workers: int, no_serve: bool) -> None:
    """Everything on embedded defaults: PostgreSQL+pgvector, Redis, demo forum, model, API and
    a worker."""
    from sidecar.api.apikey import ensure_api_key
    from sidecar.runtime.services import resolve_services

    started = time.perf_counter()
    settings, generated = ensure_api_key(settings)
    click.echo("starting services ...")
    # This process keeps the embedded servers alive; it must never load ONNX Runtime itself:
    # ORT's thread pools do not survive the fork of gunicorn workers (a worker would hang on
    # exit). So the preparation, which embeds posts, runs in a child process.
    resolve_services(settings)
    code = subprocess.call([sys.executable, "-m", "sidecar", "prepare"])
    if code != 0:
        raise click.ClickException(f"preparation failed (exit status {code})")
    key = settings.api_key.get_secret_value() if settings.api_key else ""
    base = f"http://{settings.host}:{settings.port}"
    click.secho(f"ready in {time.perf_counter() - started:.1f}s", fg="green")
    click.echo(f"API key{' (generated)' if generated else ''}: {key}")
    click.echo(f"  export SIDECAR_API_KEY={key}")
    click.echo(f"  curl -s {base}/v1/search -H \"Authorization: Bearer $SIDECAR_API_KEY\" "
               "-H 'Content-Type: application/json' -d '{\"query\": \"...\"}'")
    if not no_serve:
        worker = _start_worker()
        try:
            _serve(settings, workers)
        finally:
            _stop_worker(worker)


def _start_worker() -> subprocess.Popen[bytes]:
    """`sidecar worker` beside the demo API, so index events, webhooks and backfills get done.

    In its own session: Ctrl-C reaches gunicorn only, and the worker gets exactly one SIGTERM
    (RQ's warm shutdown: the job at hand finishes) when the server stops.
    """
    proc = subprocess.Popen([sys.executable, "-m", "sidecar", "worker"], start_new_session=True)
    click.echo(f"worker: pid {proc.pid} (index and backfill queues)")
    return proc


def _stop_worker(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:  # a job that would not finish: RQ retries it later
        proc.kill()
        proc.wait()


@click.command()
@click.option("--workers", type=int, default=None, help="Default: SIDECAR_WORKERS.")
@click.pass_obj
def serve(settings: Settings, workers: int | None) -> None:
    """Serve the API with gunicorn (no demo, no backfill): the production entry point.

    The schema is upgraded here, once, before the workers start (they never migrate); the
    embedding model is prepared on first need.
    """
    from sidecar.db.migrate import upgrade
    from sidecar.runtime.dbsession import database_conninfo
    from sidecar.runtime.model_setup import prepare_before_fork

    upgrade(database_conninfo(settings, "migrate"))
    prepare_before_fork(settings)
    _serve(settings, workers)


@click.command("search")
@click.argument("query")
@click.option("--limit", type=int, default=5, show_default=True)
@click.option("--mode", type=click.Choice(["hybrid", "semantic", "keyword"]), default="hybrid")
@click.option("--strategy", type=int, default=None)
@click.pass_obj
def search_cmd(settings: Settings, query: str, limit: int, mode: str,
               strategy: int | None) -> None:
    """Search from the shell (same pipeline as POST /v1/search)."""
    from sidecar.core.types import Mode
    from sidecar.runtime.resources import start_resources
    from sidecar.search.service import SearchOptions

    res = start_resources(settings)
    try:
        if mode != "semantic":
            from sidecar.runtime.bootstrap import sync_keyword

            sync_keyword(res)  # this node's keyword index, built the first time
        results, trace = res.search.search(
            query, limit, SearchOptions(mode=Mode(mode), strategy=strategy))
        echo_json({"results": [r.as_dict(i) for i, r in enumerate(results, 1)],
                   "trace": trace.as_list()})
    finally:
        res.close()
