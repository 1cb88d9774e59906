"""`sidecar tune-links --dump`: the demo's post judgements and accepted answers as labels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from sidecar.cli.main import main
from sidecar.runtime.bootstrap import demo_dir
from sidecar.tuning.links import MIN_LABELS
from tests.evaluation.test_cli import _env


def test_tune_links_on_the_demo_dump_reports_and_keeps_the_guard(
    eval_settings: Any, tmp_path: Path
) -> None:
    result = CliRunner().invoke(main, ["tune-links", "--dump", str(demo_dir()), "--json",
                                       "--resamples", "300"], env=_env(eval_settings))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    # The demo's 36 judged questions (their relevant topics) and its accepted answers.
    assert report["labels"] >= MIN_LABELS and report["sources"] == ["accepted", "qrels"]
    assert 0 <= report["fixed_hit"] <= 1 and 0 <= report["held_out_hit"] <= 1
    written = (eval_settings.state_dir / "search-profile.json").exists()
    assert written == (report["served"] == "learned")
