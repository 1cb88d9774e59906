"""`sidecar eval --train-embedder`: tuned on the dump's forum (never a judged topic), then the
same evaluation before and after, paired query by query; a forum too small is refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from models.manifest import read_manifest
from sidecar.cli.main import main
from sidecar.training.embed_eval import run_embedder_eval, to_markdown
from sidecar.training.embed_run import EmbedOptions
from sidecar.training.for_eval import judged_topics
from tests.helpers import write_tiny_encoder

pytestmark = [pytest.mark.torch, pytest.mark.slow]
pytest.importorskip("torch")
pytest.importorskip("transformers")


def test_the_tuned_model_is_measured_beside_the_base_on_the_same_questions(
        eval_settings: Any, eval_dump: Path, tmp_path: Path) -> None:
    settings = eval_settings.model_copy(update={"train_min_threads": 2})
    # Two judged topics: the other threads of the tiny forum are what it learns from.
    qrels = eval_dump / "qrels_topic.tsv"
    head, *rows = qrels.read_text().splitlines()
    kept = sorted({r.split("\t")[1] for r in rows if r.split("\t")[2] != "0"})[:2]
    qrels.write_text("\n".join([head, *(r for r in rows if r.split("\t")[1] in kept)]) + "\n")
    init = write_tiny_encoder(tmp_path / "init")
    options = EmbedOptions(init=str(init), batch_size=2, max_length=64, budget_s=60, mix=0.5)
    doc = run_embedder_eval(settings, eval_dump, options, parts=("retrieval",),
                            resamples=200, progress=False)
    tuned = Path(settings.state_dir) / "eval" / "models" / doc["meta"]["tuned"]
    record = read_manifest(tuned).training
    assert record is not None and record["kind"] == "embedder"
    # No topic judged for the dump's questions was read to train it.
    assert record["config"]["excluded_topics"] == len(judged_topics(eval_dump)) > 0
    served = doc["retrieval"]["text"]["served"]
    assert served["queries"] > 0
    for metric in ("mrr@10", "hit@5"):
        row = served[metric]
        assert 0 <= row["before"] <= 1 and 0 <= row["after"] <= 1
        assert row["ci"][0] <= row["difference"] <= row["ci"][1]
    assert "semantic-best" in doc["retrieval"]["text"]
    assert "| served |" in to_markdown(doc)
    # The measured model is the recipe asked for (half the tuned weights), and says so.
    assert record["config"]["mix"] == 0.5 and "mix 0.5" in to_markdown(doc)
    # The same options reuse the tuned model (no second training).
    again = run_embedder_eval(settings, eval_dump, options, parts=("retrieval",),
                              resamples=200, progress=False)
    assert again["meta"]["training"]["trained_at"] == record["trained_at"]


def test_a_forum_too_small_to_learn_from_is_refused_by_the_command(
        eval_settings: Any, eval_dump: Path, tmp_path: Path) -> None:
    env = _cli_env(eval_settings)
    out = tmp_path / "before-after.json"
    result = CliRunner().invoke(main, ["eval", "--train-embedder", "--dump", str(eval_dump),
                                       "--out", str(out)], env=env)
    assert result.exit_code == 2, result.output
    assert "needs at least 300" in result.output and not out.exists()
    assert json.dumps(result.output)  # one clear line, no traceback
    assert "Traceback" not in result.output


def _cli_env(settings: Any) -> dict[str, str]:
    return {"DATABASE_URL": settings.database_url, "REDIS_URL": settings.redis_url,
            "SIDECAR_STATE_DIR": str(settings.state_dir),
            "SIDECAR_EMBED_MODEL_PATH": str(settings.embed_model_path),
            "SIDECAR_LOG_LEVEL": "WARNING"}


class _Asked(Exception):
    """Stops the command once it has said what it would train."""


def test_the_recipe_options_reach_the_tuning_and_need_it(
        eval_settings: Any, eval_dump: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    env = _cli_env(eval_settings)
    refused = CliRunner().invoke(main, ["eval", "--train-mix", "0.5", "--dump", str(eval_dump)],
                                 env=env)
    assert refused.exit_code == 2 and "add --train-embedder" in refused.output
    asked: list[EmbedOptions] = []

    def record(settings: Any, dump: Path, options: EmbedOptions, **kw: Any) -> None:
        asked.append(options)
        raise _Asked

    monkeypatch.setattr("sidecar.training.embed_eval.run_embedder_eval", record)
    result = CliRunner().invoke(main, ["eval", "--train-embedder", "--train-epochs", "2",
                                       "--train-mix", "0.5", "--train-minutes", "3",
                                       "--dump", str(eval_dump)], env=env)
    assert isinstance(result.exception, _Asked)
    assert [(o.epochs, o.mix, o.budget_s) for o in asked] == [(2.0, 0.5, 180.0)]
