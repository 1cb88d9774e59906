"""`sidecar eval`: retrieval quality on a forum dump with human judgements."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sidecar.config.settings import Settings

# Deferred imports (fork safety): each command imports what it needs when it runs. Every command
# module is imported by `sidecar serve` and `sidecar model-host`, which fork gunicorn workers:
# ONNX Runtime's and numpy's thread pools must not be loaded before that fork (and every other
# command starts faster).

DEFAULT_DUMP = Path("../shared/eval/qatarliving")


@click.command("eval")
@click.option("--dump", "dump", type=click.Path(path_type=Path), default=DEFAULT_DUMP,
              show_default=True,
              help="Evaluation dump: categories/topics/posts JSONL, queries.jsonl, qrels TSVs.")
@click.option("--config", "configs", multiple=True, metavar="NAME",
              help="Run only these configurations (repeatable). Default: the whole matrix.")
@click.option("--baseline", default="semantic-best", show_default=True,
              help="The configuration every other one is compared with.")
@click.option("--out", type=click.Path(path_type=Path), default=Path("eval-results/eval.json"),
              show_default=True, help="Result JSON; FILE.md and FILE.png are written next to it.")
@click.option("--seed", type=int, default=0, show_default=True, help="Bootstrap seed.")
@click.option("--resamples", type=click.IntRange(min=100), default=10_000, show_default=True,
              help="Bootstrap resamples.")
@click.option("--query", "query_fields", default="text", show_default=True,
              metavar="FIELD[+DETAILS]",
              help="Field of queries.jsonl holding the query, optionally + the field holding "
                   "its details (subject+body: title as the query, body as its details).")
@click.option("--no-png", is_flag=True, help="Skip the chart.")
@click.option("--list-configs", is_flag=True, help="List the configurations and exit.")
@click.option("--part", type=click.Choice(["retrieval", "zones"]), default="retrieval",
              show_default=True,
              help="retrieval: the configuration matrix; zones: answer or abstain (answerable, "
                   "leave-out, out of domain), with the zones calibrated on the forum itself.")
@click.option("--ood", "ood", multiple=True, type=click.Path(path_type=Path),
              help="--part zones: a dump whose queries are out of domain here (repeatable).")
@click.option("--folds", type=click.IntRange(min=2), default=3, show_default=True,
              help="--part zones: leave-out folds (each hides 1/folds of the judged topics).")
@click.option("--allow-rejected", is_flag=True,
              help="Evaluate even if the dump's import rejects rows (they are left out).")
@click.option("--train-reranker", is_flag=True,
              help="First train the forum's own reranker on the dump's forum (never a topic "
                   "judged relevant to its questions), then evaluate with it served.")
@click.option("--train-minutes", type=click.FloatRange(min=1), default=60.0, show_default=True,
              help="--train-reranker / --train-embedder: the training budget.")
@click.option("--train-epochs", type=click.FloatRange(min=0.1, max=10), default=1.0,
              show_default=True, help="--train-embedder: epochs over the mined pairs.")
@click.option("--train-mix", type=click.FloatRange(min=0.05, max=1.0), default=1.0,
              show_default=True, help="--train-embedder: the share of the tuned weights in the "
                                      "model measured (the rest the base's; 1: tuned alone).")
@click.option("--train-embedder", is_flag=True,
              help="Tune the embedder on the dump's forum (never a topic judged relevant to its "
                   "questions), then evaluate before and after, paired: retrieval (both query "
                   "shapes where the dump has them), zones (with --ood) and related topics; "
                   "--part retrieval|zones runs one part.")
@click.pass_context
def evaluate(ctx: click.Context, dump: Path, configs: tuple[str, ...], baseline: str,
             out: Path, seed: int, resamples: int, query_fields: str, no_png: bool,
             list_configs: bool, allow_rejected: bool, part: str, ood: tuple[Path, ...],
             folds: int, train_reranker: bool, train_minutes: float, train_epochs: float,
             train_mix: float, train_embedder: bool) -> None:
    """Hit@k, MRR@10, nDCG@10, post Hit@5 and SemEval MAP per configuration, with CIs.

    The dump is imported and embedded once into a database of its own (reused while the dump,
    model and strategy are unchanged); see docs/evaluation.md. Rows the import rejects stop the
    evaluation (exit 2, naming them) unless --allow-rejected; an empty forum always does.
    """
    from sidecar.evaluation.configs import CATALOGUE

    settings: Settings = ctx.obj
    if list_configs:
        for c in CATALOGUE:
            extra = "" if c.default else " [not in the default matrix]"
            parent = f" (vs {c.parent}: {c.factor})" if c.parent else " (baseline)"
            click.echo(f"{c.name:22} {c.description}{parent}{extra}")
        return
    if not (dump / "queries.jsonl").is_file():
        raise click.UsageError(
            f"no evaluation dump at {dump} (queries.jsonl missing): pass --dump DIR")
    if not train_embedder and any(ctx.get_parameter_source(k) is not
                                  click.core.ParameterSource.DEFAULT
                                  for k in ("train_epochs", "train_mix")):
        raise click.UsageError("--train-epochs and --train-mix tune the embedder: add "
                               "--train-embedder")
    if train_embedder:
        explicit = ctx.get_parameter_source("part") is not click.core.ParameterSource.DEFAULT
        _embedder_before_after(settings, dump, ood, minutes=train_minutes, epochs=train_epochs,
                               mix=train_mix, out=out, seed=seed,
                               resamples=min(resamples, 2000), parts=(part,) if explicit
                               else None)
        return
    if train_reranker:
        settings = _with_trained_reranker(settings, dump, train_minutes)
    if part == "zones":
        _zones(settings, dump, ood, folds=folds, seed=seed, out=out, png=not no_png,
               resamples=resamples)
        return
    from sidecar.evaluation.evaluate import run_evaluation
    from sidecar.evaluation.report import to_markdown, write_outputs

    doc = run_evaluation(settings, dump, config_names=configs, baseline=baseline,
                         resamples=resamples, seed=seed, query_fields=query_fields,
                         allow_rejected=allow_rejected,
                         command="sidecar eval " + " ".join(sys.argv[2:]))
    written = write_outputs(doc, out, png=not no_png)
    click.echo(to_markdown(doc))
    for kind, path in written.items():
        click.echo(f"written ({kind}): {path}")
    if "png" not in written and not no_png:
        click.echo("no chart: matplotlib is not installed (pip install '.[dev]')", err=True)


def _with_trained_reranker(settings: Settings, dump: Path, minutes: float) -> Settings:
    """The settings with a reranker trained on the dump's forum as the served cross-encoder."""
    # Heavy (the models, torch while training): loaded when the command runs.
    from sidecar.training.for_eval import trained_for_eval
    from sidecar.training.run import TrainOptions

    if settings.rerank_model or settings.rerank_url or settings.rerank_model_path:
        raise click.UsageError("--train-reranker evaluates the forum's own reranker: unset "
                               "SIDECAR_RERANK_MODEL/URL/MODEL_PATH")
    model_dir, record = trained_for_eval(settings, dump, TrainOptions(budget_s=minutes * 60))
    held = record.get("held_out", {}).get("mrr")
    click.echo(f"reranker trained on the dump's forum: {model_dir}"
               + (f" (held-out MRR {held['new']} against {held['served']})" if held else ""),
               err=True)
    return settings.model_copy(update={"rerank_model_path": model_dir})


def _zones(settings: Settings, dump: Path, ood: tuple[Path, ...], *, folds: int, seed: int,
           out: Path, png: bool, resamples: int) -> None:
    """`sidecar eval --part zones`: write FILE.json, FILE.md (and FILE.png)."""
    # Heavy (numpy, scikit-learn, the models): loaded when the command runs.
    import json

    from sidecar.evaluation.zones import run_zones
    from sidecar.evaluation.zones_render import to_markdown

    for path in ood:
        if not (path / "queries.jsonl").is_file():
            raise click.UsageError(f"--ood {path}: no queries.jsonl there")
    doc = run_zones(settings, dump, ood=ood, folds=folds, seed=seed,
                    resamples=min(resamples, 2000),
                    out_png=out.with_suffix(".png") if png else None)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    text = to_markdown(doc)
    out.with_suffix(".md").write_text(text)
    click.echo(text)
    click.echo(f"written (json): {out}")


def _embedder_before_after(settings: Settings, dump: Path, ood: tuple[Path, ...], *,
                           minutes: float, epochs: float, mix: float, out: Path, seed: int,
                           resamples: int, parts: tuple[str, ...] | None) -> None:
    """`sidecar eval --train-embedder`: write FILE.json and FILE.md."""
    # Heavy (the models, torch while training): loaded when the command runs.
    import json

    from sidecar.errors import InvalidInput
    from sidecar.evaluation.dataset import load_dataset
    from sidecar.training.embed_eval import PARTS, run_embedder_eval, to_markdown
    from sidecar.training.embed_run import EmbedOptions

    if settings.embed_url:
        raise click.UsageError("--train-embedder tunes the in-process model: unset "
                               "SIDECAR_EMBED_URL")
    try:  # both query shapes where the dump has them: a question as one text, title + body
        load_dataset(dump.resolve(), "subject+body")
        shapes = ["text", "subject+body"]
    except InvalidInput:
        shapes = ["text"]
    options = EmbedOptions(budget_s=minutes * 60, epochs=epochs, mix=mix)
    doc = run_embedder_eval(settings, dump, options,
                            parts=parts or PARTS, query_fields=shapes, ood=ood,
                            resamples=resamples, seed=seed)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n")
    text = to_markdown(doc)
    out.with_suffix(".md").write_text(text)
    click.echo(text)
    click.echo(f"written (json): {out}")
