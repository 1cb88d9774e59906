"""`sidecar train-embedder`, and `sidecar embedder status|promote|rollback|prune`."""

from __future__ import annotations

import json
import sys
from datetime import datetime
from typing import Any

import click

from sidecar.config.settings import Settings

# Deferred imports (fork safety): each command imports what it needs when it runs (see
# sidecar/cli/tune.py).

# Exit status of a model trained or asked for but not served (the served one stays).
NOT_PROMOTED = 3


@click.command("train-embedder")
@click.option("--init", default=None,
              help="What to start from: the folder of a Hugging Face encoder, or an installed "
                   "model package by name [default: the served model's own checkpoint].")
@click.option("--name", default=None, help="The new model's name, a plain name inside the "
                                           "models folder [default: forum-embedder-<time>].")
@click.option("--budget-minutes", type=click.FloatRange(min=1), default=60.0,
              show_default=True, help="Training stops after this long (mining and export "
                                      "come on top).")
@click.option("--epochs", type=click.FloatRange(min=0.1, max=10), default=1.0,
              show_default=True)
@click.option("--max-length", type=click.IntRange(min=32, max=8192), default=128,
              show_default=True, help="Tokens per text while training (the served model still "
                                      "reads its own maximum).")
@click.option("--device", default="cpu", show_default=True,
              help="cpu, or cuda on a GPU host (torch's CUDA build).")
@click.option("--reembed/--no-reembed", default=True, show_default=True,
              help="Enqueue the backfill that writes the new model's vectors beside the "
                   "served ones (`sidecar worker` embeds them).")
@click.option("--reembed-budget", type=click.IntRange(min=1), default=None,
              help="Posts the re-embedding run embeds at most (the next run resumes).")
@click.option("--until", default=None, metavar="HH:MM",
              help="The re-embedding run takes no batch after this local time.")
@click.option("--wait", is_flag=True, help="Follow the re-embedding run until it stops.")
@click.option("--promote", is_flag=True,
              help="After the re-embedding (implies --wait), serve the model if the guard "
                   "finds it better on the forum's judged questions.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def train_embedder_cmd(settings: Settings, init: str | None, name: str | None,
                       budget_minutes: float, epochs: float, max_length: int, device: str,
                       reembed: bool, reembed_budget: int | None, until: str | None,
                       wait: bool, promote: bool, as_json: bool) -> None:
    """Fine-tune the embedding model on the forum's own public threads: a new model version.

    Each topic's title is a question its opening post answers; its title and first lines a
    question its accepted answer (else the first replies by others) answers; a reply that links
    another topic ties the two. The model is trained with torch (the `train` extra), exported
    to ONNX, registered beside the served one, and its vectors are written by the backfill.
    It serves only after `sidecar embedder promote` (or --promote), once its vectors cover
    every public post. docs/models.md.
    """
    # Heavy (the models, numpy, and torch while training): loaded when the command runs.
    from jobs import driver
    from jobs.runs import parse_until
    from sidecar.runtime.resources import start_resources
    from sidecar.training.embed_run import EmbedOptions, train_forum_embedder
    from sidecar.training.source import forum_judgements, label_questions

    if until and not reembed:
        raise click.UsageError("--until applies to the re-embedding run: drop --no-reembed")
    deadline = parse_until(until, datetime.now().astimezone()) if until else None
    res = start_resources(settings)
    try:
        with res.db.connection() as conn:
            # Every topic the forum's people judged is held out: the guard measures on them.
            judged = frozenset(t for _, t in label_questions(conn) + forum_judgements(
                conn, min_members=settings.click_min_members))
        options = EmbedOptions(init=init, name=name, budget_s=budget_minutes * 60,
                               epochs=epochs, max_length=max_length, device=device, held=judged)
        outcome = train_forum_embedder(res, options, progress=not as_json)
        report: dict[str, Any] = {"name": outcome.model.name, "model_dir": str(outcome.model_dir),
                                  "model_id": outcome.model.id, "training": outcome.record,
                                  "seconds": round(outcome.seconds)}
        if reembed:
            run = driver.start_run(res, model=outcome.model, budget=reembed_budget,
                                   deadline=deadline)
            report["reembed_run"] = run.id
    finally:
        res.close()
    _print_trained(report, as_json)
    if not reembed or not (wait or promote):
        return
    finished = _follow(settings, report["reembed_run"], as_json)
    if not promote:
        return
    if finished.remaining or finished.failed:
        click.echo(f"not promoted: the re-embedding run stopped with {finished.remaining} posts "
                   f"left ({finished.stop_reason}); continue with `sidecar backfill --model "
                   f"{report['name']}`, then `sidecar embedder promote {report['name']}`",
                   err=True)
        sys.exit(NOT_PROMOTED)
    _promote(settings, report["name"], force=False, as_json=as_json)


def _follow(settings: Settings, run_id: int, as_json: bool) -> Any:
    """Watch the re-embedding run until it stops taking batches; returns its record."""
    from sidecar.cli.backfill import _watch
    from sidecar.runtime.resources import start_resources

    res = start_resources(settings, load_models=False, purpose="backfill")
    try:
        return _watch(res, run_id)
    finally:
        res.close()


def _print_trained(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    record = report["training"]
    run, pairs = record["run"], record["pairs"]
    click.echo(f"{report['name']}: {report['model_dir']} ({report['seconds']} s)")
    click.echo(f"  trained on {run['pairs_seen']} pairs ({pairs['train']}) from "
               f"{pairs['threads']} topics ({pairs['held_out_topics']} held out), loss "
               f"{run['loss_first']} -> {run['loss_last']}, {run['pairs_per_s']} pairs/s, "
               f"stopped by {run['stopped_by']}")
    if "reembed_run" in report:
        click.echo(f"  re-embedding: backfill run #{report['reembed_run']} (`sidecar backfill "
                   "status --watch`); then `sidecar embedder promote "
                   f"{report['name']}`")


@click.group("embedder")
def embedder() -> None:
    """The forum-tuned embedding models: what serves, promoting one, rolling back, pruning."""


@embedder.command("status")
@click.pass_obj
def embedder_status_cmd(settings: Settings) -> None:
    """What serves, what was promoted, and each model's vectors and coverage (JSON)."""
    from sidecar.training.embed_promote import embedder_status

    click.echo(json.dumps(embedder_status(settings), indent=2))


@embedder.command("promote")
@click.argument("name")
@click.option("--force", is_flag=True,
              help="Serve it without the guard's approval (no judged questions, or not better "
                   "beyond chance): the operator's explicit choice, recorded.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_obj
def embedder_promote_cmd(settings: Settings, name: str, force: bool, as_json: bool) -> None:
    """Serve the tuned model NAME once its vectors cover every public post and the guard (the
    forum's judged questions on topics it never read) finds it better; then reload the API.
    Exit status 3 when it is not promoted (the served model stays)."""
    _promote(settings, name, force=force, as_json=as_json)


def _promote(settings: Settings, name: str, *, force: bool, as_json: bool) -> None:
    from sidecar.training.embed_promote import NotProven, NotReady, promote_embedder

    try:
        report = promote_embedder(settings, name, force=force, progress=not as_json)
    except (NotReady, NotProven) as exc:
        click.echo(f"not promoted: {exc}", err=True)
        sys.exit(NOT_PROMOTED)
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    click.echo(f"promoted {report['promoted']} (replaces {report['replaces']}): "
               f"{report['guard']}" + (" [forced]" if report["forced"] else ""))
    click.echo(f"  profile: {json.dumps(report['profile'])}")
    click.echo("  reload every API node and worker to serve it (`systemctl reload sidecar`)")


@embedder.command("rollback")
@click.pass_obj
def embedder_rollback_cmd(settings: Settings) -> None:
    """Serve the model served before the promoted one again (instant while its vectors are
    kept); then reload the API."""
    from sidecar.training.embed_promote import rollback_embedder

    report = rollback_embedder(settings)
    click.echo(f"rolled back {report['rolled_back']}; serves {report['serves']} "
               f"({report['covered']}/{report['public']} public posts embedded); reload every "
               "API node and worker")


@embedder.command("prune")
@click.option("--model", "name", default=None,
              help="Only this model (the newest tuned one, awaiting promotion, included).")
@click.option("--dry-run", is_flag=True, help="Say what would be deleted.")
@click.pass_obj
def embedder_prune_cmd(settings: Settings, name: str | None, dry_run: bool) -> None:
    """Delete the vectors (and tuned folders) of models that neither serve nor are the rollback
    target; the configured model's are kept (a node without the promoted model's folder serves
    it), and so is the newest tuned model unless named."""
    from sidecar.training.embed_promote import prune_embedders

    click.echo(json.dumps(prune_embedders(settings, name=name, dry_run=dry_run), indent=2))


@embedder.command("reembed")
@click.option("--budget", type=click.IntRange(min=1), default=None,
              help="Embed at most this many posts in this run.")
@click.option("--until", default=None, metavar="HH:MM",
              help="Take no batch after this local time (tonight's or tomorrow's).")
@click.option("--no-wait", is_flag=True, help="Enqueue the run and return (the nightly timer).")
@click.pass_obj
def embedder_reembed_cmd(settings: Settings, budget: int | None, until: str | None,
                         no_wait: bool) -> None:
    """Continue writing the newest tuned model's vectors, when it does not serve yet and they
    are incomplete (a backfill run for it; nothing to do otherwise)."""
    from jobs import driver
    from jobs.runs import parse_until
    from sidecar.runtime.resources import start_resources
    from sidecar.training.embed_promote import pending_candidate

    deadline = parse_until(until, datetime.now().astimezone()) if until else None
    res = start_resources(settings, load_models=False, purpose="backfill")
    try:
        cand = pending_candidate(res)
        if cand is None:
            click.echo("no tuned model awaits its vectors")
            return
        run = driver.start_run(res, model=cand.model, budget=budget, deadline=deadline)
    finally:
        res.close()
    click.echo(f"{cand.model.name}: {cand.covered}/{cand.public} public posts embedded; "
               f"backfill run #{run.id}")
    if not no_wait:
        _follow(settings, run.id, as_json=False)
