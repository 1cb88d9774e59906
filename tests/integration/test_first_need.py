"""The embedding model is prepared on first need, once, by whichever command needs it.

A fresh state directory has no model: the worker, the backfill, the server and the model host
each prepare the demo model (from its installed package, offline) with one log line, or stop
with the exact command to run when the model cannot be prepared here.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from models import read_manifest
from sidecar.bench.e2e_part import free_port
from sidecar.bench.procs import wait_healthy
from sidecar.cli import main
from sidecar.config.settings import Settings
from sidecar.errors import ConfigurationError
from sidecar.runtime.model_setup import ensure_model, model_source
from tests.conftest import make_settings
from tests.helpers import sidecar_command

LINE = "preparing embedding model"


def _preparing(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith(LINE)]


def test_the_default_model_is_the_demo_package_and_a_name_means_its_model() -> None:
    assert model_source(Settings()) == "sentence-transformers/all-MiniLM-L6-v2"
    # A production name alone never gets the demo model's files under that name.
    assert model_source(Settings(embed_model="bge-m3")) == "BAAI/bge-m3"
    assert model_source(Settings(embed_model="x", embed_source="/models/x")) == "/models/x"


def test_concurrent_commands_prepare_once(tmp_path: Path,
                                          caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings(state_dir=tmp_path)
    errors: list[BaseException] = []

    def prepare() -> None:
        try:
            ensure_model(settings)
        except BaseException as exc:  # collected: a thread's failure must fail the test
            errors.append(exc)

    with caplog.at_level(logging.INFO, logger="sidecar.runtime.model_setup"):
        threads = [threading.Thread(target=prepare) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert not errors
    assert len(_preparing(caplog)) == 1
    manifest = read_manifest(tmp_path / "models" / "all-minilm-l6-v2")
    assert (manifest.name, manifest.dimensions) == ("all-minilm-l6-v2", 384)


def test_what_cannot_be_prepared_says_what_to_run(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as offline:
        ensure_model(Settings(state_dir=tmp_path, embed_model="bge-m3"))
    target = tmp_path / "models" / "bge-m3"
    assert f"sidecar models prepare BAAI/bge-m3 --task embed --out {target}" in \
        offline.value.message
    assert not (target / "manifest.json").exists()
    named = tmp_path / "operator-dir"
    with pytest.raises(ConfigurationError, match=f"no prepared model in {named}: run"):
        ensure_model(Settings(state_dir=tmp_path, embed_model_path=named))


def test_a_worker_on_a_fresh_state_directory_prepares_and_works(
    tmp_path: Path, db_url: str, redis_url: str, redis_client: object,
    caplog: pytest.LogCaptureFixture,
) -> None:
    env = {"DATABASE_URL": db_url, "REDIS_URL": redis_url,
           "SIDECAR_STATE_DIR": str(tmp_path / "fresh")}
    with caplog.at_level(logging.INFO):
        result = CliRunner().invoke(main, ["worker", "--burst"], env=env)
    assert result.exit_code == 0, result.output
    assert len(_preparing(caplog)) == 1
    assert (tmp_path / "fresh" / "models" / "all-minilm-l6-v2" / "manifest.json").is_file()
    # The backfill joins the prepared model without a second preparation.
    caplog.clear()
    with caplog.at_level(logging.INFO):
        done = CliRunner().invoke(main, ["backfill", "--no-wait"], env=env)
    assert done.exit_code == 0, done.output
    assert not _preparing(caplog)


def test_a_backfill_first_prepares_too(tmp_path: Path, db_url: str, redis_url: str,
                                       redis_client: object) -> None:
    settings = make_settings(tmp_path, db_url, redis_url)
    env = {"DATABASE_URL": db_url, "REDIS_URL": redis_url,
           "SIDECAR_STATE_DIR": str(settings.state_dir)}
    result = CliRunner().invoke(main, ["backfill", "--no-wait"], env=env)
    assert result.exit_code == 0, result.output
    assert (settings.embed_dir() / "manifest.json").is_file()


def test_model_host_on_a_fresh_state_directory_serves(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "SIDECAR_STATE_DIR": str(tmp_path / "fresh"),
           "SIDECAR_MODEL_HOST_PORT": str(port), "SIDECAR_LOG_LEVEL": "INFO"}
    proc = subprocess.Popen([*sidecar_command(), "model-host", "--threads", "2"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(f"{url}/health", proc, timeout=240)
        body = httpx.post(f"{url}/v1/embeddings", json={"model": "all-minilm-l6-v2",
                                                        "input": "hello"}, timeout=60).json()
        assert len(body["data"][0]["embedding"]) == 384
    finally:
        proc.terminate()
        output = proc.communicate(timeout=60)[0]
    assert output.count(LINE) == 1, output
