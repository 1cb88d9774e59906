"""`sidecar calibrate`: zone thresholds from the forum's own questions.

Exit status: 0 when the thresholds were written (or nothing was to be written: ``--dry-run``),
1 on an error, and :data:`PAST_BOUND` when the calibration moved a threshold past its bound
(``SIDECAR_CALIBRATION_MAX_MOVE``, ``SIDECAR_CALIBRATION_MAX_FROM_OWN``): the served thresholds
are kept, the calibration is recorded as pending in the search profile (the moderators'
calibration page shows it and why), and a person applies it with ``--approve``. The weekly
unit reloads the API only on 0.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from typing import cast

import click

from sidecar.config.settings import Settings

# Deferred imports (fork safety): each command imports what it needs when it runs (see
# sidecar/cli/tune.py).

PAST_BOUND = 3


@click.command("calibrate")
@click.option("--questions", type=click.IntRange(min=20), default=300, show_default=True,
              help="Opening posts of the forum asked as questions (each without its topic).")
@click.option("--seed", type=int, default=None,
              help="Which topics are drawn (the same forum and seed draw the same ones); "
                   "default: a random seed, recorded with the thresholds.")
@click.option("--abstain-pct", type=click.FloatRange(0, 100), default=10.0, show_default=True,
              help="Abstain below this percentile of their best scores.")
@click.option("--normal-pct", type=click.FloatRange(0, 100), default=80.0, show_default=True,
              help="Normal from this percentile (this share of them get cautious or abstain).")
@click.option("--basis", type=click.Choice(["auto", "opening_posts", "asked"]), default="auto",
              show_default=True,
              help="Where the normal threshold is read from: the opening posts, or up to "
                   "--questions of the questions members asked (stored retrievals; a few per "
                   "asker, near-duplicates once), each re-asked without the topic that "
                   "answered it best; auto takes the members' once 100 are stored from "
                   "SIDECAR_CALIBRATION_MIN_ASKERS askers.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--dry-run", is_flag=True, help="Report only; do not write the search profile.")
@click.option("--approve", is_flag=True,
              help="Serve the pending calibrations (those that moved past their bound, shown "
                   "on the moderators' calibration page) as they were reported; calibrates "
                   "nothing.")
@click.pass_obj
def calibrate_cmd(settings: Settings, questions: int, seed: int | None, abstain_pct: float,
                  normal_pct: float, basis: str, as_json: bool, dry_run: bool,
                  approve: bool) -> None:
    """Calibrate the answer zones on the forum itself, before anyone labels anything.

    Opening posts are asked as members' questions with their own topic hidden: questions of the
    forum's subject that the rest of the forum does not answer. The normal threshold lets about
    (100 - normal-pct)% of them through, the abstain threshold is where the forum's own
    questions stop (off-topic ones fall below it). Written to the search profile
    (SIDECAR_SEARCH_PROFILE); restart or reload the API to apply. A calibration that moves a
    threshold past its bound is not written but left pending, and the command exits 3: review
    it on the moderators' calibration page, then `sidecar calibrate --approve`.
    docs/answerability.md.
    """
    if approve:
        _approve(settings, as_json)
        return
    if abstain_pct >= normal_pct:
        raise click.UsageError("--abstain-pct must be below --normal-pct")
    # Heavy (the models, numpy): loaded when the command runs.
    from sidecar.answer.zone_calibration import Basis, calibrate_zones
    from sidecar.runtime.resources import start_resources
    from sidecar.search.profile import update_profile, with_pending, with_zones

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
                       f"topic ({run.seconds:.0f} s, seed {c.seed})")
            normal_of = (f" of {c.asked} questions {run.askers} askers asked, each without the "
                         "topic that answered it best" if c.basis == "asked" else "")
            click.echo(f"  abstain below {c.abstain:.4f} (p{c.abstain_pct:g}); normal from "
                       f"{c.normal:.4f} (p{c.normal_pct:g}{normal_of})")
            click.echo(f"  before: abstain below {run.before['abstain']:g}, normal from "
                       f"{run.before['normal']:g}, which let "
                       f"{run.before['share_of_unanswered_normal']:.0%} of them through as "
                       "normal")
        for problem in run.problems:
            click.echo(f"past the bound: {problem}", err=True)
        if dry_run:
            click.echo("dry run: no search profile written", err=as_json)
            if run.problems:
                sys.exit(PAST_BOUND)
            return
        path = settings.profile_path()
        model, strategy = res.model.name, settings.strategy
        if run.problems:
            update_profile(path, lambda: with_pending(
                path, run.calibration, run.problems, model=model, strategy=strategy,
                settings=settings))
            click.echo(f"not applied: the served thresholds are kept and this calibration is "
                       f"pending in {path}; review it on /moderation/calibration, then "
                       "`sidecar calibrate --approve`", err=True)
            sys.exit(PAST_BOUND)
        digest = update_profile(path, lambda: with_zones(
            path, run.calibration, model=model, strategy=strategy, settings=settings))
        click.echo(f"zones written to {path} (sha256 {digest[:12]}); restart or reload the API "
                   "to apply", err=as_json)
    finally:
        res.close()


def _approve(settings: Settings, as_json: bool) -> None:
    """Serve every pending calibration as reported, marking its normal threshold approved."""
    # Deferred like the rest (fork safety); no model is loaded to approve.
    from sidecar.search.profile import profile_pending, read_profile, update_profile, with_zones

    path = settings.profile_path()
    pending = profile_pending(settings)
    if not pending:
        raise click.ClickException(f"no pending calibration in {path}")
    profile, _ = read_profile(path)
    approved = []
    for scorer, (calibration, problems) in sorted(pending.items()):
        calibration = dataclasses.replace(calibration, approved_normal=calibration.normal)
        update_profile(path, functools.partial(with_zones, path, calibration,
                                               model=profile.model, strategy=profile.strategy,
                                               settings=settings))
        approved.append({"scorer": scorer, "abstain": calibration.abstain,
                         "normal": calibration.normal, "problems": problems})
    if as_json:
        click.echo(json.dumps({"approved": approved}, indent=2))
    for item in approved:
        click.echo(f"approved {item['scorer']}: abstain below {item['abstain']:.4f}, normal "
                   f"from {item['normal']:.4f}; restart or reload the API to apply",
                   err=as_json)
