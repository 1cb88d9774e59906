"""`sidecar backfill`: embed public posts that have no vector or whose text changed.

By default the run is planned and worked by `sidecar worker` through RQ, and this command
follows it with a progress bar (Ctrl-C stops watching, not the run). `--sync` does the same work
in this process, without the queue. `status`, `pause`, `resume` and `stop` act on runs.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime
from typing import TYPE_CHECKING, Any

import click

from sidecar.cli.output import echo_json
from sidecar.config.settings import Settings

if TYPE_CHECKING:
    from sidecar.runtime.resources import Resources

# Deferred imports (fork safety): each command imports what it needs when it runs. Every command
# module is imported by `sidecar serve` and `sidecar model-host`, which fork gunicorn workers:
# ONNX Runtime's and numpy's thread pools must not be loaded before that fork (and every other
# command starts faster).

POLL_S = 1.0


def _print_run(run: Any, as_json: bool) -> None:
    if as_json:
        echo_json(run.as_dict())
        return
    state = run.status + (f" ({run.stop_reason})" if run.stop_reason else "")
    click.echo(f"run #{run.id}  {run.model_name} / strategy {run.strategy_id}  {state}")
    if run.started_at is None and run.live:
        click.echo("  planning  waiting for a worker to select the posts"
                   + (f" (budget {run.budget})" if run.budget else ""))
    elif run.started_at is None:
        click.echo("  planned   nothing: stopped before planning")
    else:
        click.echo(f"  planned   {run.budgeted} posts (missing {run.phase_missing}, outdated "
                   f"{run.phase_outdated}, drift {run.phase_drift} of which "
                   f"{run.swept_unchanged} unchanged)"
                   + (f", budget {run.budget}" if run.budget else "")
                   + (f", {run.not_planned} left for a later run" if run.not_planned else ""))
        if run.removed_not_public:
            click.echo(f"  removed   the vectors of posts no longer public: "
                       f"{run.removed_not_public}")
    click.echo(f"  done      {run.done} embedded, {run.skipped_unchanged} unchanged, "
               f"{run.skipped_gone} gone, {run.failed} failed, {run.remaining} remaining")
    if run.deadline:
        click.echo(f"  deadline  {run.deadline.astimezone():%Y-%m-%d %H:%M %Z}")
    if run.waiting_reason and run.live:
        click.secho(f"  waiting   since {run.waiting_since:%H:%M:%S}: the forum's database is "
                    f"busy ({run.waiting_reason})", fg="yellow")
    if run.pause_reason:
        click.secho(f"  paused    {run.pause_reason}", fg="yellow")
    elif run.last_error:
        click.echo(f"  last error {run.last_error}")
    if run.index_status:
        click.echo(f"  index     {run.index_status}")


def _watch(res: Resources, run_id: int) -> Any:
    """A progress bar fed by the run record until the run stops taking batches."""
    from tqdm import tqdm

    from sidecar.db.backfill_runs import RunStatus, get_run

    with res.db.connection() as conn:
        run = get_run(conn, run_id)
    bar = tqdm(total=run.budgeted or None, unit="post",
               desc=f"run #{run_id} ({run.model_name}, strategy {run.strategy_id})")
    try:
        while True:
            with res.db.connection() as conn:
                run = get_run(conn, run_id)
            if run.budgeted and bar.total != run.budgeted:
                bar.reset(total=run.budgeted)
            bar.n = run.budgeted - run.remaining if run.status != RunStatus.PLANNING else 0
            bar.set_postfix(embedded=run.done, unchanged=run.skipped_unchanged,
                            failed=run.failed, status=run.status, refresh=False)
            bar.refresh()
            if run.status in (RunStatus.FINISHED, RunStatus.PAUSED):
                return run
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        click.echo(f"\nstopped watching; run #{run_id} goes on: `sidecar backfill status "
                   f"--watch`", err=True)
        sys.exit(130)
    finally:
        bar.close()


def _no_worker_warning(res: Resources) -> None:
    from rq import Worker

    from jobs.queues import queue_name

    wanted = queue_name(res.settings, "backfill")
    if not any(wanted in w.queue_names() for w in Worker.all(connection=res.redis)):
        click.secho(f"no worker listens on {wanted}: start `sidecar worker` (the run waits "
                    "for one)", fg="yellow", err=True)


@click.group(invoke_without_command=True)
@click.option("--model", "model_name", default=None,
              help="A prepared or registered model name (default: SIDECAR_EMBED_MODEL).")
@click.option("--strategy", type=click.IntRange(1, 2), default=None,
              help="1 truncation, 2 enriched (default: SIDECAR_STRATEGY).")
@click.option("--budget", type=click.IntRange(min=1), default=None,
              help="Embed at most this many posts in this run.")
@click.option("--until", default=None, metavar="HH:MM",
              help="Take no batch after this local time (tonight's or tomorrow's).")
@click.option("--sync", is_flag=True, help="Work in this process, without the queue.")
@click.option("--no-wait", is_flag=True, help="Enqueue the run and return (the nightly timer).")
@click.option("--json", "as_json", is_flag=True, help="Print the final run record as JSON.")
@click.pass_context
def backfill(ctx: click.Context, model_name: str | None, strategy: int | None,
             budget: int | None, until: str | None, sync: bool, no_wait: bool,
             as_json: bool) -> None:
    """Embed every public post that needs it, newest topics first, then build the HNSW index.

    Order: posts with no vector for (model, strategy), then vectors of an older model or
    strategy version, then posts whose text changed (digest drift).
    """
    if ctx.invoked_subcommand is not None:
        if any((model_name, strategy, budget, until, sync, no_wait, as_json)):
            raise click.UsageError("options of a run go without a subcommand: "
                                   "`sidecar backfill --budget N`, `sidecar backfill status`")
        return
    from jobs import driver
    from jobs.runs import parse_until

    settings: Settings = ctx.obj
    deadline = parse_until(until, datetime.now().astimezone()) if until else None
    if sync:
        _backfill_sync(settings, model_name, strategy, budget, deadline, as_json)
        return
    from sidecar.runtime.resources import start_resources

    # Enqueue and watch: the worker embeds, so no model is loaded here.
    res = start_resources(settings, load_models=False, model_name=model_name,
                          purpose="backfill")
    try:
        run = driver.start_run(res, model=res.model, strategy=strategy, budget=budget,
                               deadline=deadline)
        click.echo(f"run #{run.id} queued on {settings.queue_prefix}-backfill", err=True)
        _no_worker_warning(res)
        if not no_wait:
            run = _watch(res, run.id)
        _print_run(run, as_json)
    finally:
        res.close()


def _backfill_sync(settings: Settings, model_name: str | None, strategy: int | None,
                   budget: int | None, deadline: datetime | None, as_json: bool) -> None:
    from tqdm import tqdm

    from jobs import driver
    from jobs.batch import run_sync
    from sidecar.runtime.resources import start_resources

    if model_name and model_name != settings.embed_model:
        settings = settings.model_copy(update={"embed_model": model_name,
                                               "embed_model_path": None, "embed_source": None})
    # The cross-encoder is not needed to embed posts.
    settings = settings.model_copy(update={"rerank_model": None, "rerank_model_path": None,
                                           "rerank_url": None})
    res = start_resources(settings, purpose="backfill")
    try:
        run = driver.start_run(res, strategy=strategy, budget=budget, deadline=deadline,
                               enqueue=False)
        with tqdm(unit="post", desc=f"run #{run.id} ({res.model.name}, strategy "
                                    f"{run.strategy_id})") as bar:
            def progress(current: Any) -> None:
                if bar.total != current.budgeted:
                    bar.reset(total=current.budgeted)
                bar.n = current.budgeted - current.remaining
                bar.set_postfix(embedded=current.done, unchanged=current.skipped_unchanged,
                                refresh=False)
                bar.refresh()

            run = run_sync(res, run.id, on_progress=progress)
        _print_run(run, as_json)
    finally:
        res.close()


def _pick_run(res: Resources, run_id: int | None) -> int:
    from sidecar.db.backfill_runs import list_runs

    if run_id is not None:
        return run_id
    with res.db.connection() as conn:
        live = list_runs(conn, limit=2, live_only=True)
        runs = live or list_runs(conn, limit=1)
    if not runs:
        raise click.ClickException("no backfill run yet: start one with `sidecar backfill`")
    if len(live) > 1:
        raise click.ClickException("several runs are live: say which with --run ID")
    return int(runs[0].id)


@backfill.command("status")
@click.option("--run", "run_id", type=int, default=None, help="Default: the live or last run.")
@click.option("--all", "show_all", is_flag=True, help="The last 20 runs.")
@click.option("--watch", is_flag=True, help="Follow the run with a progress bar.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def status(settings: Settings, run_id: int | None, show_all: bool, watch: bool,
           as_json: bool) -> None:
    """Budgeted, done, skipped, failed, remaining and why the run stopped."""
    from sidecar.db.backfill_runs import get_run, list_runs
    from sidecar.runtime.resources import start_resources

    res = start_resources(settings, load_models=False, purpose="backfill")
    try:
        if show_all:
            with res.db.connection() as conn:
                runs = list_runs(conn, limit=20)
            if as_json:
                echo_json([r.as_dict() for r in runs])
            for r in [] if as_json else runs:
                _print_run(r, False)
            return
        picked = _pick_run(res, run_id)
        if watch:
            _watch(res, picked)
        with res.db.connection() as conn:
            _print_run(get_run(conn, picked), as_json)
    finally:
        res.close()


def _action(settings: Settings, run_id: int | None, action: str, as_json: bool) -> None:
    from jobs import driver
    from jobs.runs import change_status
    from sidecar.runtime.resources import start_resources

    res = start_resources(settings, load_models=False, purpose="backfill")
    try:
        picked = _pick_run(res, run_id)
        with res.db.connection() as conn:
            change_status(conn, picked, action)
        if action == "resume":
            driver.reconcile(res, picked)
            _no_worker_warning(res)
        with res.db.connection() as conn:
            from sidecar.db.backfill_runs import get_run

            _print_run(get_run(conn, picked), as_json)
    finally:
        res.close()


for _name, _help in (("pause", "Take no more batches until `resume` (running ones finish)."),
                     ("resume", "Take batches again (after a pause on provider errors)."),
                     ("stop", "Finish the run now; what is left goes to the next run.")):
    def _make(action: str) -> Any:
        @click.option("--run", "run_id", type=int, default=None)
        @click.option("--json", "as_json", is_flag=True)
        @click.pass_obj
        def command(settings: Settings, run_id: int | None, as_json: bool) -> None:
            _action(settings, run_id, action, as_json)
        return command

    backfill.command(_name, help=_help)(_make(_name))
