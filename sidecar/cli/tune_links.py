"""`sidecar tune-links`: learn the linked post's rule from the forum's own labels."""

from __future__ import annotations

import json
from pathlib import Path

import click

from sidecar.config.settings import Settings

# Deferred imports (fork safety): each command imports what it needs when it runs (see
# sidecar/cli/tune.py).


@click.command("tune-links")
@click.option("--dump", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Learn from an evaluation dump's post judgements (and its accepted answers) "
                   "instead of the served forum's accepted answers.")
@click.option("--folds", type=click.IntRange(min=2), default=5, show_default=True)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--resamples", type=click.IntRange(min=100), default=10_000, show_default=True)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--dry-run", is_flag=True, help="Report only; do not write the search profile.")
@click.pass_obj
def tune_links_cmd(settings: Settings, dump: Path | None, folds: int, seed: int,
                   resamples: int, as_json: bool, dry_run: bool) -> None:
    """Learn which post of a topic answers, guarded by held-out labels.

    Labels: accepted answers (Discourse Solved) of the forum, or a dump's post judgements. The
    learned rule is written to the search profile only when, on held-out labels, it links a
    good post significantly more often than the fixed rule (docs/search.md, "The linked post").
    """
    # Heavy (scikit-learn, the models): loaded when the command runs.
    from sidecar.evaluation.dataset import load_dataset
    from sidecar.evaluation.state import prepare_state
    from sidecar.runtime.resources import start_resources
    from sidecar.search.profile import update_profile, with_link_rule
    from sidecar.tuning import links

    if dump is not None:
        state = prepare_state(settings, dump.resolve(), progress=not as_json)
        res = state.resources
        labels = links.dump_labels(load_dataset(dump.resolve())) + links.forum_labels(res)
    else:
        res = start_resources(settings)
        labels = links.forum_labels(res)
    try:
        items = links.read(res, labels, progress=not as_json)
        try:
            rule, report = links.tune_links(items, folds=folds, seed=seed, resamples=resamples)
        except ValueError as exc:
            raise click.ClickException(str(exc)) from exc
        if as_json:
            click.echo(json.dumps(report, indent=2))
        else:
            d = report["difference"]
            click.echo(f"{report['labels']} labelled topics ({', '.join(report['sources'])}), "
                       f"{report['folds']} folds: a good post linked {report['held_out_hit']:.3f}"
                       f" held out (learned) against {report['fixed_hit']:.3f} (fixed rule): "
                       f"{d['mean']:+.3f} [{d['ci_low']:+.3f}, {d['ci_high']:+.3f}]")
            click.echo(f"serving the {report['served']} rule: {report['why']}")
        if dry_run or report["served"] != "learned":
            return
        path = settings.profile_path()
        digest = update_profile(path, lambda: with_link_rule(
            path, rule, report, model=res.model.name, strategy=settings.strategy,
            settings=settings))
        click.echo(f"link rule written to {path} (sha256 {digest[:12]}); restart or reload the "
                   "API to apply", err=as_json)
    finally:
        res.close()
