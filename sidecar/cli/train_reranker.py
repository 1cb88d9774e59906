"""`sidecar train-reranker`, and `sidecar reranker status|rollback`: the forum's own reranker."""

from __future__ import annotations

import json
from typing import Any

import click

from models.names import InvalidModelName, check_model_name
from sidecar.config.settings import Settings

# Deferred imports (fork safety): each command imports what it needs when it runs (see
# sidecar/cli/tune.py).


def _plain_name(value: str | None) -> str | None:
    """A --name that is a plain model name (checked before anything starts)."""
    try:
        return None if value is None else check_model_name(value)
    except InvalidModelName as exc:
        raise click.BadParameter(str(exc)) from exc


@click.command("train-reranker")
@click.option("--init", default="all-MiniLM-L6-v2", show_default=True,
              help="What to start from: an installed model package by name (the embedder's "
                   "encoder), or the folder of a Hugging Face encoder or cross-encoder "
                   "(mmarco, a bge reranker: then it is fine-tuned).")
@click.option("--name", default=None, callback=lambda _ctx, _param, value: _plain_name(value),
              help="The model's name, a folder inside the models folder that is not there yet "
                   "(letters, digits, '.', '_', '-') [default: forum-reranker-<time>].")
@click.option("--budget-minutes", type=click.FloatRange(min=1), default=60.0,
              show_default=True, help="Training stops after this long (mining and the check "
                                      "come on top).")
@click.option("--max-pairs", type=click.IntRange(min=100), default=40_000, show_default=True,
              help="Pairs trained on, whole questions at a time.")
@click.option("--max-topics", type=click.IntRange(min=50), default=5000, show_default=True,
              help="Public topics read (drawn by a hash of their id).")
@click.option("--epochs", type=click.FloatRange(min=0.1, max=10), default=1.0,
              show_default=True)
@click.option("--max-length", type=click.IntRange(min=32, max=512), default=160,
              show_default=True, help="Tokens of question and post the model reads.")
@click.option("--fp32", is_flag=True, help="Keep the fp32 graph (for a GPU; int8 otherwise).")
# Off by default: on Qatar Living a model the guard passed (held-out mined pairs) still
# ranked the judged questions' topics worse (docs/answerability.md); a person decides.
@click.option("--promote/--no-promote", default=False, show_default=True,
              help="Serve it when it beats what is served held out (the search profile), then "
                   "calibrate its zones. Without it the model is trained, judged and kept "
                   "aside: `sidecar eval --train-reranker` first.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def train_reranker_cmd(settings: Settings, init: str, name: str | None, budget_minutes: float,
                       max_pairs: int, max_topics: int, epochs: float, max_length: int,
                       fp32: bool, promote: bool, as_json: bool) -> None:
    """Train a cross-encoder from the forum's own public threads, check it held out, promote it.

    Each topic's opening post is a question, its accepted answer (else the first replies by others)
    what answers it, the posts of other topics its search ranks high what does not. The model learns
    which close posts do not answer (it only demotes the cosine); it is exported to ONNX (int8)
    under the models folder and served only when it beats what is served on topics it never read
    (exit status 3 otherwise: the old one stays). Needs the `train` extra (torch). docs/models.md.
    """
    # Heavy (the models, numpy, and torch while training): loaded when the command runs.
    from sidecar.runtime.resources import start_resources
    from sidecar.training.run import TrainOptions, train_forum_reranker

    options = TrainOptions(init=init, name=name, max_threads=max_topics, max_pairs=max_pairs,
                           budget_s=budget_minutes * 60, epochs=epochs, max_length=max_length,
                           quantize=not fp32)
    res = start_resources(settings)
    try:
        outcome = train_forum_reranker(res, options, progress=not as_json)
        model_name = res.model.name
        overridden = res.settings.rerank_model or res.settings.rerank_url
    finally:
        res.close()
    verdict = outcome.verdict
    report: dict[str, Any] = {"name": outcome.name, "model_dir": str(outcome.model_dir),
                              "promote": verdict.promote, "reason": verdict.reason,
                              "held_out": verdict.figures, "training": outcome.record,
                              "seconds": round(outcome.seconds)}
    if verdict.promote and promote:
        report["promoted"] = _promote(settings, model_name, outcome, overridden, as_json)
    _print(report, as_json)
    if not verdict.promote:
        raise SystemExit(3)


def _promote(settings: Settings, model: str, outcome: Any, overridden: str | None,
             as_json: bool) -> dict[str, Any]:
    from sidecar.answer.zone_calibration import calibrate_zones
    from sidecar.runtime.resources import start_resources
    from sidecar.search.profile import update_profile, with_zones
    from sidecar.training.promote import promote

    digest = promote(settings, model=model, name=outcome.name, model_dir=outcome.model_dir,
                     training=outcome.record, held_out=outcome.verdict.figures)
    out: dict[str, Any] = {"profile": str(settings.profile_path()), "digest": digest}
    if overridden:
        out["note"] = (f"SIDECAR_RERANK_MODEL/URL names {overridden}: it is served instead; "
                       "unset it to serve the forum's reranker")
        return out
    # Its zones, calibrated as `sidecar calibrate` does, so the API never serves it on the
    # settings' thresholds.
    res = start_resources(settings)
    try:
        run = calibrate_zones(res, progress=not as_json, basis="opening_posts")
        path = settings.profile_path()
        out["digest"] = update_profile(path, lambda: with_zones(
            path, run.calibration, model=model, strategy=settings.strategy,
            settings=settings))
        out["zones"] = {"scorer": run.calibration.scorer, "abstain": run.calibration.abstain,
                        "normal": run.calibration.normal}
    finally:
        res.close()
    return out


def _print(report: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(report, indent=2))
        return
    figures = report["held_out"]
    click.echo(f"{report['name']}: {report['model_dir']} ({report['seconds']} s)")
    pairs = report["training"]["pairs"]
    run = report["training"]["run"]
    click.echo(f"  trained on {run['pairs_seen']} pairs ({pairs['trained_on']} mined from "
               f"{pairs['threads']} topics), loss {run['loss_first']} -> {run['loss_last']}, "
               f"stopped by {run['stopped_by']}")
    if "mrr" in figures:
        m = figures["mrr"]
        click.echo(f"  held out ({figures['questions']} questions): MRR {m['new']} against "
                   f"{m['served']} for {figures['scorers']['served']}, difference "
                   f"{m['difference']:+} [{m['ci'][0]:+}, {m['ci'][1]:+}]")
    verdict = ("promoted" if report.get("promoted") else "better held out, not promoted "
               "(--promote serves it)" if report["promote"] else "kept the served one")
    click.echo(f"  {verdict}: {report['reason']}")
    promoted = report.get("promoted")
    if promoted:
        if "zones" in promoted:
            z = promoted["zones"]
            click.echo(f"  zones of {z['scorer']}: abstain below {z['abstain']:.4f}, normal "
                       f"from {z['normal']:.4f}")
        if "note" in promoted:
            click.echo(f"  note: {promoted['note']}")
        click.echo(f"  written to {promoted['profile']}: reload the API to serve it")


@click.group("reranker")
def reranker() -> None:
    """The forum's promoted reranker: what is served, and rolling it back."""


@reranker.command("status")
@click.pass_obj
def reranker_status(settings: Settings) -> None:
    """The promoted reranker, how it was trained and what it scored held out (JSON)."""
    from sidecar.training.promote import promoted_entry

    entry = promoted_entry(settings)
    click.echo(json.dumps(entry.model_dump() if entry else None, indent=2))


@reranker.command("rollback")
@click.pass_obj
def reranker_rollback(settings: Settings) -> None:
    """Serve the reranker promoted before this one again (or none: the cosine)."""
    from sidecar.runtime.resources import start_resources
    from sidecar.training.promote import rollback

    res = start_resources(settings, load_models=False)
    try:
        model = res.model.name
    finally:
        res.close()
    try:
        now, gone = rollback(settings, model=model)
    except ValueError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"rolled back {gone.name}; served now: {now.name if now else 'no reranker'} "
               "(reload the API to apply)")
