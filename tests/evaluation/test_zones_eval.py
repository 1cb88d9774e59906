"""Answer or abstain on the demo forum: `sidecar calibrate`, and `sidecar eval --part zones`."""

from __future__ import annotations

import hashlib
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


def asker(n: int) -> str:
    """An opaque asker id, as the forum's plugin sends it (a hash of the member's id)."""
    return hashlib.sha256(f"forum secret:member {n}".encode()).hexdigest()


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
        # Two stored questions, of one anonymous asker, are too few to read the normal
        # threshold from the members'.
        few = CliRunner().invoke(main, ["calibrate", "--basis", "asked", "--dry-run"], env=env)
        assert few.exit_code == 1 and "come from 1 askers" in few.output
        for i, q in enumerate(load_dataset(demo_dir()).queries):  # the members ask
            resp = client.post("/v1/retrieve", headers=auth, json={
                "messages": [{"role": "user", "content": q.text}], "asker": asker(i)})
            assert resp.status_code == 200
    finally:
        res.close()
    try:
        auto = CliRunner().invoke(main, ["calibrate", "--dry-run", "--json"], env=env)
        assert json.loads(auto.stdout)["basis"] == "opening_posts"  # fewer than 100 stored
        result = CliRunner().invoke(main, ["calibrate", "--basis", "asked", "--json"], env=env)
        members = json.loads(result.stdout)
        assert members["basis"] == "asked" and members["asked"] >= 30
        # One question each, and the two asked above without an asker id: one anonymous asker.
        assert members["askers"] == members["asked"] - 1
        # The abstain threshold stays the opening posts'; the normal one is the members'.
        assert members["abstain"] == report["abstain"] and members["normal"] != report["normal"]
        # Members ask less like the opening posts than they are like each other: normal moves
        # 15 points of the forum's own questions in one step, past the bound. Not served: it
        # waits for a person, and the command fails (the weekly unit reloads nothing).
        assert result.exit_code == 3, result.output
        assert "MAX_MOVE" in members["problems"][0]
        waiting, _ = read_profile(settings.profile_path())
        assert waiting.zones["bi-encoder:all-minilm-l6-v2"] == zones
        assert waiting.pending["bi-encoder:all-minilm-l6-v2"].zones.normal == members["normal"]
        approved = CliRunner().invoke(main, ["calibrate", "--approve"], env=env)
        assert approved.exit_code == 0, approved.output
        served, _ = read_profile(settings.profile_path())
        assert served.zones["bi-encoder:all-minilm-l6-v2"].normal == members["normal"]
        assert served.zones["bi-encoder:all-minilm-l6-v2"].approved_normal == members["normal"]
        assert not served.pending
        # Approved, it anchors the next run: the same questions again are within the bound.
        again = CliRunner().invoke(main, ["calibrate", "--basis", "asked", "--json"], env=env)
        assert again.exit_code == 0 and not json.loads(again.stdout)["problems"], again.output
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
            conn.execute("DELETE FROM sidecar.sidecar_retrievals")
        settings.profile_path().unlink(missing_ok=True)


VAGUE = "any tips to make my home server setup work better?"
OPENERS = ("Hi all", "Hello", "Hey", "Quick question", "Help please", "Good morning", "Folks",
           "Dear forum")
NAMES = ("Bob", "Alice", "Carol", "Dan", "Eve", "Frank", "Grace", "Heidi", "Ivan", "Judy")
SUBJECTS = ("baking sourdough bread", "knitting a wool scarf", "tuning a violin",
            "growing tomatoes on a balcony", "training for a marathon", "learning Japanese kanji",
            "painting with watercolours", "brewing beer at home", "caring for a bonsai tree",
            "restoring an old bicycle", "writing a mystery novel", "playing chess openings",
            "keeping backyard chickens", "sewing a summer dress", "fishing for trout",
            "making pottery on a wheel", "photographing the night sky", "building a birdhouse",
            "raising a puppy", "planning a wedding", "carving a wooden spoon",
            "learning salsa dancing", "making french macarons", "decorating a cake",
            "birdwatching in winter", "playing the ukulele", "writing haiku poems",
            "climbing a mountain", "surfing big waves", "collecting vintage stamps",
            "making homemade pasta", "speaking Italian", "sailing a small boat",
            "growing orchids", "folding origami cranes", "riding a horse", "making candles",
            "quilting a blanket", "juggling three balls", "skiing off-piste")


def test_floods_of_questions_move_nothing_past_the_bound(eval_settings: Any) -> None:
    """The review's attack, through /v1/retrieve, then what the weekly timer runs: copies of
    one vague question with a counter, a flood from one asker, near-duplicates from many
    askers. None of them switches the basis; the one flood that gets past those guards (60
    askers, each a distinct question, most of another subject) moves normal past its bound, so
    it is left pending and the served thresholds stay."""
    state = prepare_state(eval_settings, demo_dir(), progress=False)
    state.close()
    settings = state.settings
    env = {**_env(eval_settings), "DATABASE_URL": settings.database_url,
           "SIDECAR_STATE_DIR": str(settings.state_dir),
           "SIDECAR_SEARCH_PROFILE": str(settings.profile_path())}
    first = CliRunner().invoke(main, ["calibrate", "--json"], env=env)
    assert first.exit_code == 0, first.output
    served = json.loads(first.stdout)
    auth = {"Authorization": f"Bearer {API_KEY}"}
    questions = load_dataset(demo_dir()).queries

    def flood(*asked: tuple[str, str | None]) -> None:
        res = start_resources(settings)
        try:
            client = create_app(settings, res).test_client()
            for text, who in asked:
                body: dict[str, Any] = {"messages": [{"role": "user", "content": text}]}
                if who is not None:
                    body["asker"] = who
                assert client.post("/v1/retrieve", headers=auth, json=body).status_code == 200
        finally:
            res.close()

    def weekly() -> dict[str, Any]:
        auto = CliRunner().invoke(main, ["calibrate", "--json"], env=env)
        assert auto.exit_code == 0, auto.output
        report: dict[str, Any] = json.loads(auto.stdout)
        assert report["basis"] == "opening_posts" and not report["problems"], report
        assert (report["abstain"], report["normal"]) == (served["abstain"], served["normal"])
        return report

    try:
        # One vague question, a counter in each, no asker id: one anonymous asker.
        flood(*((f"Hi all, {VAGUE} #{i}", None) for i in range(150)))
        weekly()
        flood(*((f"{questions[i % len(questions)].text} ({i})", asker(1000))  # one asker
                for i in range(150)),
              *((f"{OPENERS[i % 8]}! {VAGUE} Thanks, {NAMES[i % 10]}", asker(i))  # wordings
                for i in range(150)))
        report = weekly()
        assert report["seed"] != served["seed"]  # drawn at random each run, recorded
        asked = CliRunner().invoke(main, ["calibrate", "--basis", "asked", "--json"], env=env)
        # What is left: the one asker's three newest, and one of the vague question's wordings.
        assert asked.exit_code == 1 and "come from 2 askers" in asked.output, asked.output

        # Sybils: distinct askers, distinct questions, most of them of other subjects.
        flood(*((f"What is the best way to get started with {subject}?", asker(2000 + i))
                for i, subject in enumerate(SUBJECTS)),
              *((q.text, asker(3000 + i)) for i, q in enumerate(questions[:20])))
        moved = CliRunner().invoke(main, ["calibrate", "--basis", "asked", "--json"], env=env)
        report = json.loads(moved.stdout)
        assert report["basis"] == "asked" and report["askers"] >= 60
        assert report["normal"] < served["normal"] and report["problems"], report
        assert moved.exit_code == 3
        after, _ = read_profile(settings.profile_path())
        kept = after.zones["bi-encoder:all-minilm-l6-v2"]
        assert (kept.abstain, kept.normal) == (served["abstain"], served["normal"])
        assert after.pending["bi-encoder:all-minilm-l6-v2"].problems == report["problems"]
    finally:
        with psycopg.connect(settings.database_url) as conn:
            conn.execute("DELETE FROM sidecar.sidecar_retrievals")
        settings.profile_path().unlink(missing_ok=True)
