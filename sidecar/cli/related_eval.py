"""`sidecar eval-related`: related topics against search, and the composer's silence."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from sidecar.config.settings import Settings

# Deferred imports (fork safety): each command imports what it needs when it runs (see
# sidecar/cli/tune.py).

DEFAULT_DUMP = Path("../shared/eval/qatarliving")
DEFAULT_OOD = (Path("../shared/eval/covidfaq"),)


@click.command("eval-related")
@click.option("--dump", type=click.Path(exists=True, file_okay=False, path_type=Path),
              default=DEFAULT_DUMP, show_default=True,
              help="A dump whose judgements relate questions to topics (its queries become "
                   "topics of a copy of its forum).")
@click.option("--ood", multiple=True, type=click.Path(exists=True, file_okay=False,
                                                      path_type=Path),
              help="Other dumps whose questions this forum cannot answer (repeatable; "
                   "default ../shared/eval/covidfaq).")
@click.option("--max-ood", type=click.IntRange(min=0), default=0, show_default=True,
              help="Questions asked per other dump, the first ones (0: all).")
@click.option("--calibration-questions", type=click.IntRange(min=20), default=300,
              show_default=True, help="Opening posts asked to calibrate the zones.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--resamples", type=click.IntRange(min=100), default=10_000, show_default=True)
@click.option("--out", type=click.Path(path_type=Path), default=Path("eval-results/related"),
              show_default=True, help="Folder for related.json and related.md.")
@click.pass_obj
def eval_related(settings: Settings, dump: Path, ood: tuple[Path, ...], max_ood: int,
                 calibration_questions: int, seed: int, resamples: int, out: Path) -> None:
    """Measure /v1/topics/<id>/related against /v1/search with the same text, and
    /v1/similar's answers and silence at each zone threshold (docs/related.md)."""
    # Heavy (numpy, the models, the evaluation state): loaded when the command runs.
    from sidecar.evaluation.related import run_related_eval
    from sidecar.evaluation.related_render import render

    others = ood or tuple(p for p in DEFAULT_OOD if p.is_dir())
    doc = run_related_eval(settings, dump, ood=others, calibration_questions=calibration_questions,
                           seed=seed, resamples=resamples, max_ood=max_ood)
    command = "sidecar " + " ".join(sys.argv[1:])
    doc["meta"]["command"] = command
    out.mkdir(parents=True, exist_ok=True)
    (out / "related.json").write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    text = render(doc, command)
    (out / "related.md").write_text(text)
    click.echo(text)
    click.echo(f"written: {out / 'related.json'}, {out / 'related.md'}")
