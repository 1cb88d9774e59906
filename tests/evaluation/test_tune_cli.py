"""`sidecar tune --dump` writes a search profile that `sidecar eval` and the API then serve."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from sidecar.api.app import create_app
from sidecar.cli.main import main
from sidecar.runtime.bootstrap import demo_dir
from sidecar.runtime.resources import start_resources
from sidecar.search.profile import read_profile
from tests.conftest import API_KEY
from tests.evaluation.test_cli import _env


def test_tune_on_the_demo_dump_then_eval_and_search_serve_the_profile(
    eval_settings: Any, tmp_path: Path
) -> None:
    out = tmp_path / "tune"
    args = ["tune", "--dump", str(demo_dir()), "--min-queries", "30", "--resamples", "200",
            "--out", str(out)]
    result = CliRunner().invoke(main, args, env=_env(eval_settings))
    assert result.exit_code == 0, result.output
    assert "tuned (held-out)" in result.output and "search profile written" in result.output
    doc = json.loads((out / "tune.json").read_text())
    assert doc["judgements"]["by_source"]["qrels"] == 36
    profile_path = eval_settings.state_dir / "search-profile.json"
    profile, digest = read_profile(profile_path)
    assert profile.served.to_config().describe() == doc["served"]["describe"]

    # `sidecar eval` measures what is served: the profile's configuration, beside each leg.
    eval_out = tmp_path / "eval" / "eval.json"
    result = CliRunner().invoke(main, [
        "eval", "--dump", str(demo_dir()), "--config", "keyword-best", "--config", "served",
        "--resamples", "200", "--no-png", "--out", str(eval_out)], env=_env(eval_settings))
    assert result.exit_code == 0, result.output
    ev = json.loads(eval_out.read_text())
    service = ev["meta"]["service_config"]
    assert service["source"] == "profile" and service["digest"] == digest
    assert service["served"] == doc["served"]["describe"]
    served_vs = {c["reference"] for c in ev["comparisons"] if c["config"] == "served"}
    # the demo grades posts: the served links are also compared with the other choosers
    assert served_vs == {"semantic-best", "keyword-best", "served-link-fused",
                         "served-link-semantic"}
    assert "Served configuration (profile)" in result.output

    # The API serves it too, and says so in /v1/health.
    res = start_resources(eval_settings)
    try:
        client = create_app(eval_settings, res).test_client()
        auth = {"Authorization": f"Bearer {API_KEY}"}
        health = client.get("/v1/health", headers=auth).json
        assert health["search"]["source"] == "profile"
        assert health["search"]["served"] == doc["served"]["describe"]
        body = client.post("/v1/search", json={"query": "ZFS pool", "limit": 3},
                           headers=auth).json
        assert body["config"] == doc["served"]["describe"]
    finally:
        res.close()
