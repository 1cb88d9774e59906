"""Answer or abstain on the demo forum: `sidecar calibrate`, and `sidecar eval --part zones`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import psycopg
from click.testing import CliRunner

from sidecar.api.app import create_app
from sidecar.cli.main import main
from sidecar.evaluation.dataset import load_dataset
from sidecar.evaluation.state import prepare_state
from sidecar.runtime.bootstrap import demo_dir
from sidecar.runtime.resources import start_resources
from sidecar.search.profile import read_profile
from tests.conftest import API_KEY
from tests.evaluation.conftest import write_eval_dump
from tests.evaluation.test_cli import _env


def test_eval_zones_on_the_demo_with_another_dump_out_of_domain(
    eval_settings: Any, tmp_path: Path
) -> None:
    ood = write_eval_dump(tmp_path / "other")
    out = tmp_path / "zones" / "zones.json"
    result = CliRunner().invoke(main, [
        "eval", "--part", "zones", "--dump", str(demo_dir()), "--ood", str(ood),
        "--resamples", "200", "--out", str(out)], env=_env(eval_settings))
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert out.with_suffix(".md").is_file() and out.with_suffix(".png").is_file()
    sides = doc["zones"]["calibrated"]
    assert sides["answerable"]["n"] == 36 and sides["leave_out"]["n"] == 36
    assert sides["out_of_domain"]["n"] == 5
    cal = doc["thresholds"]["calibrated"]
    assert cal["abstain"] < cal["normal"] and cal["questions"] >= 20
    # The trade-off of other percentiles starts from the same scores as the served thresholds.
    trade = doc["tradeoff"]
    assert trade["normal"]["80"]["threshold"] == cal["normal"]
    assert trade["abstain"]["10"]["threshold"] == cal["abstain"]
    held = [trade["normal"][p]["leave_out_held_back"] for p in ("40", "50", "60", "70", "80")]
    assert held == sorted(held)  # a higher normal threshold holds back more
    combined = doc["tradeoff_combined"]["normal"]
    held = [combined[p]["leave_out_held_back"] for p in ("40", "50", "60", "70", "80")]
    assert held == sorted(held) and combined["80"]["threshold"] > combined["40"]["threshold"]
    # Standardised on the calibration questions, their own combined scores centre on zero.
    assert combined["40"]["threshold"] < 0.5 and combined["80"]["threshold"] > -0.5
    abstain = doc["tradeoff_combined"]["abstain"]
    assert abstain["5"]["threshold"] < abstain["15"]["threshold"]
    # Leave-out questions are asked without their relevant topics: their evidence never hits.
    assert all(not r["evidence_hit"] for r in doc["per_query"] if r["side"] == "leave_out")
    assert sum(r["evidence_hit"] for r in doc["per_query"] if r["side"] == "answerable") >= 30
    for side in ("leave_out", "out_of_domain"):
        for signal, v in doc["auroc"][side].items():
            assert 0.0 <= v["ci_low"] <= v["auroc"] <= v["ci_high"] <= 1.0, signal
    # The answerable questions score higher than the same questions without their topics.
    assert doc["auroc"]["leave_out"]["similarity"]["auroc"] > 0.6
    assert "combined" in doc["auroc"]["out_of_domain"] and "combined" in doc["risk_coverage"]
    assert "| p80 |" in out.with_suffix(".md").read_text()
    assert doc["logistic"]["auroc_held_out"] is not None
    # Thresholds read from the members' questions, held out by fold (no label read).
    members = doc["thresholds"]["members"]
    assert len(members["normal_by_fold"]) == 3 and members["questions"] >= 30
    assert members["abstain"] == cal["abstain"]
    by_members = doc["zones"]["members' questions"]
    assert by_members["answerable"]["n"] == 36 and by_members["leave_out"]["n"] == 36
    assert "Answer or abstain" in result.output


def test_calibrate_writes_zones_that_retrieve_then_serves(
    eval_settings: Any, tmp_path: Path
) -> None:
    # The demo forum as an evaluation state: imported and embedded once.
    state = prepare_state(eval_settings, demo_dir(), progress=False)
    state.close()
    settings = state.settings
    env = {**_env(eval_settings), "DATABASE_URL": settings.database_url,
           "SIDECAR_STATE_DIR": str(settings.state_dir),
           "SIDECAR_SEARCH_PROFILE": str(settings.profile_path())}
    dry = CliRunner().invoke(main, ["calibrate", "--dry-run", "--json"], env=env)
    assert dry.exit_code == 0, dry.output
    report = json.loads(dry.stdout)
    assert report["scorer"] == "bi-encoder:all-minilm-l6-v2"
    assert report["questions"] >= 20 and report["abstain"] < report["normal"]
    assert not settings.profile_path().exists()

    result = CliRunner().invoke(main, ["calibrate"], env=env)
    assert result.exit_code == 0, result.output
    profile, _ = read_profile(settings.profile_path())
    zones = profile.zones["bi-encoder:all-minilm-l6-v2"]
    assert (zones.abstain, zones.normal) == (report["abstain"], report["normal"])
    assert not profile.tuned  # zones only: the search stays the settings'

    res = start_resources(settings)
    try:
        client = create_app(settings, res).test_client()
        auth = {"Authorization": f"Bearer {API_KEY}"}
        health = client.get("/v1/health", headers=auth).json
        assert health["search"]["source"] == "settings"
        assert health["search"]["zones"]["bi-encoder:all-minilm-l6-v2"]["normal"] == zones.normal
        body = client.post("/v1/retrieve", headers=auth, json={"messages": [
            {"role": "user", "content": "How do I get WireGuard through CGNAT?"}]}).json
        assert "of this forum's own questions" in body["zone_reason"]
        zone = next(s for s in body["trace"] if s["step"] == "zone")["detail"]
        assert (zone["abstain_below"], zone["normal_from"]) == (zones.abstain, zones.normal)
        off_topic = client.post("/v1/retrieve", headers=auth, json={"messages": [
            {"role": "user", "content": "What is the best recipe for a lemon tart?"}]}).json
        assert off_topic["zone"] == "abstain"
        # Two stored questions are too few to read the normal threshold from the members'.
        few = CliRunner().invoke(main, ["calibrate", "--basis", "asked", "--dry-run"], env=env)
        assert few.exit_code == 1 and "at least 20" in few.output
        for q in load_dataset(demo_dir()).queries:  # the members ask (each stored)
            resp = client.post("/v1/retrieve", headers=auth,
                               json={"messages": [{"role": "user", "content": q.text}]})
            assert resp.status_code == 200
    finally:
        res.close()
    try:
        auto = CliRunner().invoke(main, ["calibrate", "--dry-run", "--json"], env=env)
        assert json.loads(auto.stdout)["basis"] == "opening_posts"  # fewer than 100 stored
        result = CliRunner().invoke(main, ["calibrate", "--basis", "asked", "--json"], env=env)
        assert result.exit_code == 0, result.output
        members = json.loads(result.stdout)
        assert members["basis"] == "asked" and members["asked"] >= 30
        # The abstain threshold stays the opening posts'; the normal one is the members'.
        assert members["abstain"] == report["abstain"] and members["normal"] != report["normal"]
        res = start_resources(settings)
        client = create_app(settings, res).test_client()
        body = client.post("/v1/retrieve", headers=auth, json={"messages": [
            {"role": "user", "content": "How do I get WireGuard through CGNAT?"}]}).json
        assert f"calibrated on {members['asked']} questions this forum's members asked" in \
            body["zone_reason"]
        zone = next(s for s in body["trace"] if s["step"] == "zone")["detail"]
        assert zone["normal_from"] == members["normal"]
        res.close()
    finally:
        with psycopg.connect(settings.database_url) as conn:
            conn.execute("DELETE FROM sidecar_retrievals")
        settings.profile_path().unlink(missing_ok=True)
