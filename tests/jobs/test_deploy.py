"""deploy/: the environment example, the systemd units' commands, gunicorn with the app factory."""

from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from sidecar.config.settings import Settings
from tests.conftest import API_KEY

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
ENV_LINE = re.compile(r"^(#?)([A-Z][A-Z0-9_]*)=(.*)$")
# Values the example sets on purpose to something other than the default.
NOT_DEFAULT = {"SIDECAR_STATE_DIR", "SIDECAR_PROXY_HOPS"}


def _env_name(name: str, field: Any) -> str:
    alias = field.validation_alias
    return str(alias.choices[0]) if alias is not None else f"SIDECAR_{name.upper()}"


def _example() -> dict[str, tuple[bool, str]]:
    """NAME -> (set, value) for every NAME= line, commented or not."""
    found: dict[str, tuple[bool, str]] = {}
    for line in (DEPLOY / "sidecar.env.example").read_text().splitlines():
        match = ENV_LINE.match(line)
        if match:
            assert match[2] not in found, f"{match[2]} is listed twice"
            found[match[2]] = (match[1] == "", match[3])
    return found


def test_env_example_lists_every_setting_with_its_default(tmp_path: Path) -> None:
    example = _example()
    fields = {_env_name(n, f): (n, f) for n, f in Settings.model_fields.items()}
    assert set(example) == set(fields), "deploy/sidecar.env.example is out of date"
    # The uncommented lines parse, and each one is the default.
    active = "\n".join(f"{k}={v}" for k, (on, v) in example.items() if on)
    env_file = tmp_path / "sidecar.env"
    env_file.write_text(active)
    loaded = Settings(_env_file=env_file)  # type: ignore[call-arg]
    for key, (on, _) in example.items():
        name, field = fields[key]
        if on and key not in NOT_DEFAULT:
            assert getattr(loaded, name) == field.default, key
        if not on:
            assert field.default is None, f"{key} has a default: list it uncommented"


def _unit_commands(unit: Path) -> list[list[str]]:
    """The `sidecar ...` command lines of a unit, with its Environment= values substituted."""
    env: dict[str, str] = {}
    commands = []
    for line in unit.read_text().splitlines():
        if line.startswith("Environment="):
            env.update(dict(pair.split("=", 1) for pair in shlex.split(line[12:])))
        elif line.startswith(("ExecStart=", "ExecStartPre=")):
            argv = shlex.split(line.split("=", 1)[1])
            argv = [re.sub(r"\$\{(\w+)\}", lambda m: env[m[1]], a) for a in argv]
            if argv[0].endswith("/sidecar"):
                commands.append(argv[1:])
    return commands


@pytest.mark.parametrize("unit", ["sidecar-api.service", "sidecar-worker.service",
                                  "sidecar-backfill.service", "sidecar-calibrate.service",
                                  "sidecar-train-reranker.service",
                                  "sidecar-train-embedder.service"])
def test_the_units_call_commands_that_exist(unit: str) -> None:
    from click.testing import CliRunner

    from sidecar.cli.main import main

    commands = _unit_commands(DEPLOY / unit)
    assert commands, unit
    for argv in commands:
        # Click parses the whole line, then --help stops before running anything: an unknown
        # command or option, or a bad value, exits 2.
        result = CliRunner().invoke(main, [*argv, "--help"])
        assert result.exit_code == 0, f"{unit}: {argv}: {result.output}"
    bad = CliRunner().invoke(main, [*commands[-1], "--no-such-option", "--help"])
    assert bad.exit_code == 2


def test_the_weekly_calibration_reloads_the_api() -> None:
    timer = (DEPLOY / "sidecar-calibrate.timer").read_text()
    assert re.search(r"^OnCalendar=Sun ", timer, re.M) and "Persistent=true" in timer
    service = (DEPLOY / "sidecar-calibrate.service").read_text()
    assert _unit_commands(DEPLOY / "sidecar-calibrate.service") == [
        ["calibrate", "--questions", "300", "--basis", "auto"]]
    # The API reads the profile at start-up: the unit reloads it, which the API unit supports.
    assert "ExecStartPost=+/bin/systemctl reload sidecar-api.service" in service
    assert re.search(r"^ExecReload=", (DEPLOY / "sidecar-api.service").read_text(), re.M)


def test_the_monthly_training_reloads_the_api_only_when_it_promoted() -> None:
    timer = (DEPLOY / "sidecar-train-reranker.timer").read_text()
    assert re.search(r"^OnCalendar=Sat \*-\*-01\.\.07 ", timer, re.M)
    assert "Persistent=true" in timer
    service = (DEPLOY / "sidecar-train-reranker.service").read_text()
    assert _unit_commands(DEPLOY / "sidecar-train-reranker.service") == [
        ["train-reranker", "--budget-minutes", "60"]]
    # Not promoted: the command exits 3, the oneshot unit fails and ExecStartPost never runs.
    assert "Type=oneshot" in service
    assert "ExecStartPost=+/bin/systemctl reload sidecar-api.service" in service


def test_the_monthly_tuning_trains_reembeds_and_reports_but_never_promotes_as_shipped() -> None:
    timer = (DEPLOY / "sidecar-train-embedder.timer").read_text()
    assert re.search(r"^OnCalendar=Sat \*-\*-15\.\.21 ", timer, re.M)
    assert "Persistent=true" in timer
    service = (DEPLOY / "sidecar-train-embedder.service").read_text()
    assert _unit_commands(DEPLOY / "sidecar-train-embedder.service") == [
        ["train-embedder", "--budget-minutes", "120", "--until", "06:30", "--wait"]]
    assert "Type=oneshot" in service
    # Promoting is the operator's to switch on: the reloads ship commented out.
    assert not re.search(r"^ExecStartPost=", service, re.M)
    assert "#ExecStartPost=+/bin/systemctl reload sidecar-api.service" in service


def test_the_timer_starts_the_backfill_service() -> None:
    timer = (DEPLOY / "sidecar-backfill.timer").read_text()
    assert re.search(r"^OnCalendar=", timer, re.M) and "Persistent=true" in timer
    service = (DEPLOY / "sidecar-backfill.service").read_text()
    assert "Type=oneshot" in service and "--no-wait" in service and "--budget" in service
    # A tuned embedder's unfinished vectors get a run of their own each night.
    assert ["embedder", "reembed", "--budget", "50000", "--until", "06:30", "--no-wait"] in \
        _unit_commands(DEPLOY / "sidecar-backfill.service")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.slow
def test_gunicorn_serves_the_app_factory(tmp_path: Path, db_url: str, redis_url: str,
                                         minilm_dir: Path) -> None:
    from sidecar.db.migrate import upgrade

    upgrade(db_url)  # the unit's ExecStartPre: workers only check the schema
    port = _free_port()
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("SIDECAR_") and k not in {"DATABASE_URL", "REDIS_URL"}}
    env.update({"DATABASE_URL": db_url, "REDIS_URL": redis_url, "SIDECAR_API_KEY": API_KEY,
                "SIDECAR_STATE_DIR": str(tmp_path), "SIDECAR_EMBED_MODEL_PATH": str(minilm_dir),
                "SIDECAR_PORT": str(port), "SIDECAR_WORKERS": "1", "SIDECAR_THREADS": "2",
                "HF_HUB_OFFLINE": "1"})
    gunicorn = Path(sys.executable).parent / "gunicorn"
    log = tmp_path / "gunicorn.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(gunicorn), "-c", str(DEPLOY / "gunicorn.conf.py")],
                                env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            try:
                resp = httpx.get(f"http://127.0.0.1:{port}/v1/ready", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.3)
        assert resp.status_code == 200 and resp.json()["ready"] is True
        unauthorized = httpx.get(f"http://127.0.0.1:{port}/v1/admin/backfill", timeout=5)
        assert unauthorized.status_code == 401
        runs = httpx.get(f"http://127.0.0.1:{port}/v1/admin/backfill", timeout=5,
                         headers={"Authorization": f"Bearer {API_KEY}"})
        assert runs.status_code == 200 and runs.json()["runs"] == []
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
