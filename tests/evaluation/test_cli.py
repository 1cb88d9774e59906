"""`sidecar eval` from the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from sidecar.cli.main import main


def _env(settings: Any) -> dict[str, str]:
    return {"DATABASE_URL": settings.database_url, "REDIS_URL": settings.redis_url,
            "SIDECAR_STATE_DIR": str(settings.state_dir),
            "SIDECAR_EMBED_MODEL_PATH": str(settings.embed_model_path),
            "SIDECAR_LOG_LEVEL": "WARNING"}


def test_list_configs() -> None:
    result = CliRunner().invoke(main, ["eval", "--list-configs"])
    assert result.exit_code == 0
    assert "semantic-best" in result.output and "hybrid-best-rerank" in result.output
    assert "not in the default matrix" in result.output


def test_missing_dump_is_a_clear_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["eval", "--dump", str(tmp_path / "nowhere")])
    assert result.exit_code == 2
    assert "no evaluation dump" in result.output and "--dump" in result.output


def test_unknown_configuration_is_a_clear_error(eval_settings: Any, eval_dump: Path) -> None:
    result = CliRunner().invoke(main, ["eval", "--dump", str(eval_dump), "--config", "nope"],
                                env=_env(eval_settings))
    assert result.exit_code == 2
    assert "unknown configuration(s) nope" in result.output


def test_eval_writes_json_markdown_and_png(eval_settings: Any, eval_dump: Path,
                                           tmp_path: Path) -> None:
    out = tmp_path / "results" / "eval.json"
    args = ["eval", "--dump", str(eval_dump), "--out", str(out), "--config", "semantic-best",
            "--config", "keyword-best", "--resamples", "200", "--seed", "5"]
    result = CliRunner().invoke(main, args, env=_env(eval_settings))
    assert result.exit_code == 0, result.output
    assert "| **semantic-best** |" in result.output and "| keyword-best |" in result.output
    doc = json.loads(out.read_text())
    assert doc["meta"]["bootstrap"] == {"resamples": 200, "seed": 5, "confidence": 0.95}
    assert doc["meta"]["command"].startswith("sidecar eval")
    assert out.with_suffix(".md").is_file() and out.with_suffix(".png").is_file()
    # Same seed, same state: the same comparison, to the last digit.
    again = CliRunner().invoke(main, args, env=_env(eval_settings))
    assert again.exit_code == 0, again.output
    second = json.loads(out.read_text())
    assert second["comparisons"] == doc["comparisons"]
    assert second["meta"]["state"]["reused"] is True


def _break_posts(dump: Path, keep: int) -> None:
    """Rewrite posts.jsonl so that every row after the first ``keep`` lacks its text."""
    lines = (dump / "posts.jsonl").read_text().splitlines()
    broken = []
    for i, line in enumerate(lines):
        row = json.loads(line)
        if i >= keep:
            row["body"] = row.pop("raw")  # another dump format's column name
        broken.append(json.dumps(row))
    (dump / "posts.jsonl").write_text("\n".join(broken) + "\n")


def test_eval_on_an_unimportable_dump_fails_naming_the_rejected_rows(
    eval_settings: Any, eval_dump: Path, tmp_path: Path
) -> None:
    _break_posts(eval_dump, keep=0)
    out = tmp_path / "results" / "eval.json"
    args = ["eval", "--dump", str(eval_dump), "--out", str(out), "--config", "keyword-best",
            "--resamples", "100", "--no-png"]
    result = CliRunner().invoke(main, args, env=_env(eval_settings))
    assert result.exit_code != 0, result.output
    assert "rejected 25 rows" in result.output
    assert "posts.jsonl:1: raw: Field required" in result.output
    assert "--allow-rejected" in result.output
    assert "0.000" not in result.output and not out.exists()
    # Allowing the rejected rows does not allow evaluating an empty forum.
    allowed = CliRunner().invoke(main, [*args, "--allow-rejected"], env=_env(eval_settings))
    assert allowed.exit_code != 0, allowed.output
    assert "no public post" in allowed.output and not out.exists()


def test_eval_with_some_rejected_rows_runs_only_when_allowed(
    eval_settings: Any, eval_dump: Path, tmp_path: Path
) -> None:
    _break_posts(eval_dump, keep=24)  # the private topic's post is rejected
    out = tmp_path / "eval.json"
    args = ["eval", "--dump", str(eval_dump), "--out", str(out), "--config", "keyword-best",
            "--resamples", "100", "--no-png"]
    refused = CliRunner().invoke(main, args, env=_env(eval_settings))
    assert refused.exit_code != 0 and "posts.jsonl:25" in refused.output
    allowed = CliRunner().invoke(main, [*args, "--allow-rejected"], env=_env(eval_settings))
    assert allowed.exit_code == 0, allowed.output
    assert json.loads(out.read_text())["meta"]["state"]["imported"]["rejected_rows"] == 1
    # The state is reused now, and still refused without the flag.
    again = CliRunner().invoke(main, args, env=_env(eval_settings))
    assert again.exit_code != 0 and "posts.jsonl:25" in again.output


def test_eval_train_reranker_refuses_a_forum_too_small_to_train(eval_settings: Any,
                                                                tmp_path: Path) -> None:
    from sidecar.runtime.bootstrap import demo_dir

    result = CliRunner().invoke(main, [
        "eval", "--dump", str(demo_dir()), "--train-reranker", "--part", "zones",
        "--out", str(tmp_path / "zones.json")], env=_env(eval_settings))
    assert result.exit_code == 2, result.output
    assert "needs at least 300" in result.output
    assert not (tmp_path / "zones.json").exists()
