"""`sidecar calibrate`: zone thresholds from the forum's own questions."""

from __future__ import annotations

import json
from typing import cast

import click

from sidecar.config.settings import Settings

# Deferred imports (fork safety): each command imports what it needs when it runs (see
# sidecar/cli/tune.py).


@click.command("calibrate")
@click.option("--questions", type=click.IntRange(min=20), default=300, show_default=True,
              help="Opening posts of the forum asked as questions (each without its topic).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Which topics are drawn (the same forum and seed draw the same ones).")
@click.option("--abstain-pct", type=click.FloatRange(0, 100), default=10.0, show_default=True,
              help="Abstain below this percentile of their best scores.")
@click.option("--normal-pct", type=click.FloatRange(0, 100), default=80.0, show_default=True,
              help="Normal from this percentile (this share of them get cautious or abstain).")
@click.option("--basis", type=click.Choice(["auto", "opening_posts", "asked"]), default="auto",
              show_default=True,
              help="Where the normal threshold is read from: the opening posts, or up to "
                   "--questions of the questions members asked (stored retrievals), each "
                   "re-asked without the topic that answered it best; auto takes the members' "
                   "once 100 are stored.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--dry-run", is_flag=True, help="Report only; do not write the search profile.")
@click.pass_obj
def calibrate_cmd(settings: Settings, questions: int, seed: int, abstain_pct: float,
                  normal_pct: float, basis: str, as_json: bool, dry_run: bool) -> None:
    """Calibrate the answer zones on the forum itself, before anyone labels anything.

    Opening posts are asked as members' questions with their own topic hidden: questions of the
    forum's subject that the rest of the forum does not answer. The normal threshold lets about
    (100 - normal-pct)% of them through, the abstain threshold is where the forum's own
    questions stop (off-topic ones fall below it). Written to the search profile
    (SIDECAR_SEARCH_PROFILE); restart or reload the API to apply. docs/answerability.md.
    """
    if abstain_pct >= normal_pct:
        raise click.UsageError("--abstain-pct must be below --normal-pct")
    # Heavy (the models, numpy): loaded when the command runs.
    from sidecar.answer.zone_calibration import Basis, calibrate_zones
    from sidecar.runtime.resources import start_resources
    from sidecar.search.profile import with_zones, write_profile

    res = start_resources(settings)
    try:
        try:
            run = calibrate_zones(res, questions=questions, seed=seed, abstain_pct=abstain_pct,
                                  normal_pct=normal_pct, basis=cast(Basis, basis),
                                  progress=not as_json)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from exc
        report = run.as_dict()
        if as_json:
            click.echo(json.dumps(report, indent=2))
        else:
            c = run.calibration
            click.echo(f"{c.scorer}: {c.questions} questions of this forum asked without their "
                       f"topic ({run.seconds:.0f} s)")
            normal_of = (f" of {c.asked} questions members asked, each without the topic that "
                         "answered it best" if c.basis == "asked" else "")
            click.echo(f"  abstain below {c.abstain:.4f} (p{c.abstain_pct:g}); normal from "
                       f"{c.normal:.4f} (p{c.normal_pct:g}{normal_of})")
            click.echo(f"  before: abstain below {run.before['abstain']:g}, normal from "
                       f"{run.before['normal']:g}, which let "
                       f"{run.before['share_of_unanswered_normal']:.0%} of them through as "
                       "normal")
        if dry_run:
            click.echo("dry run: no search profile written", err=as_json)
            return
        path = settings.profile_path()
        digest = write_profile(path, with_zones(path, run.calibration, model=res.model.name,
                                                strategy=settings.strategy, settings=settings))
        click.echo(f"zones written to {path} (sha256 {digest[:12]}); restart or reload the API "
                   "to apply", err=as_json)
    finally:
        res.close()
