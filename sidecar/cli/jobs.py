"""`sidecar worker` (the RQ worker with preloaded models) and `sidecar queues` (what is in them)."""

from __future__ import annotations

import click

from sidecar.cli.output import echo_json
from sidecar.config.settings import Settings

# Deferred imports (fork safety): each command imports what it needs when it runs. Every command
# module is imported by `sidecar serve` and `sidecar model-host`, which fork gunicorn workers:
# ONNX Runtime's and numpy's thread pools must not be loaded before that fork (and every other
# command starts faster).


@click.command("worker")
@click.option("--burst", is_flag=True, help="Work until the queues are empty, then exit.")
@click.option("--queue", "kinds", multiple=True, type=click.Choice(["index", "backfill"]),
              help="Queues to work (repeatable). Default: index first, then backfill.")
@click.option("--heartbeat-ttl", type=click.IntRange(2, 3600), default=60, show_default=True,
              help="Seconds after which a silent job counts as abandoned (worker killed).")
@click.option("--name", default=None, help="Worker name in `rq info` (default: host.pid).")
@click.pass_obj
def worker(settings: Settings, burst: bool, kinds: tuple[str, ...], heartbeat_ttl: int,
           name: str | None) -> None:
    """Load the models once, then work the index and backfill queues (no fork per job)."""
    from jobs.queues import KINDS
    from jobs.worker import run_worker
    from sidecar.runtime.resources import start_resources

    # Jobs embed; the cross-encoder would only take memory here.
    settings = settings.model_copy(update={"rerank_model": None, "rerank_model_path": None,
                                           "rerank_url": None})
    res = start_resources(settings, purpose="worker")
    try:
        click.echo(f"worker on {res.urls.redis_url}: model {res.model.name} "
                   f"({res.embedder.provider}), queues "
                   f"{', '.join(f'{settings.queue_prefix}-{k}' for k in kinds or KINDS)}",
                   err=True)
        run_worker(res, burst=burst, kinds=kinds or KINDS, heartbeat_ttl=heartbeat_ttl,
                   name=name)
    finally:
        res.close()


@click.command("queues")
@click.option("--failed", type=click.IntRange(0, 100), default=5, show_default=True,
              help="Show this many recent failures per queue, with their reason.")
@click.pass_obj
def queues_cmd(settings: Settings, failed: int) -> None:
    """Queue sizes, workers and recent failures; prints the Redis URL for `rq info`."""
    import redis

    from jobs.queues import report
    from sidecar.runtime.services import embedded_redis_url

    url = settings.redis_url or embedded_redis_url(settings.state_dir)
    conn = redis.Redis.from_url(url)
    try:
        echo_json({"redis_url": url, **report(conn, settings, failed=failed)})
    finally:
        conn.close()
