"""`sidecar models prepare` and `sidecar model-host` end to end (gunicorn in a subprocess)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest
import safetensors.numpy
from click.testing import CliRunner

from models import OnnxEmbedder, load_reranker, read_manifest
from models.export.random_weights import build_random_encoder
from models.tiny import tiny_bert_config
from models.tokenization import TOKENIZER_FILE
from sidecar.cli import main


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"SIDECAR_STATE_DIR": str(tmp_path / "state"), "SIDECAR_LOG_LEVEL": "WARNING",
            "HF_HUB_OFFLINE": "1", **extra}  # fmt: skip


def _checkpoint(tmp_path: Path, tokenizer_from: Path) -> Path:
    """A local Hugging Face cross-encoder checkpoint (config + safetensors + tokenizer)."""
    src = tmp_path / "my-cross-encoder"
    src.mkdir()
    config = tiny_bert_config(classifier=True)
    (src / "config.json").write_text(json.dumps(config))
    safetensors.numpy.save_file(build_random_encoder(config, 5), str(src / "model.safetensors"))
    shutil.copy2(tokenizer_from / TOKENIZER_FILE, src / TOKENIZER_FILE)
    return src


def test_prepare_an_installed_package_by_name(tmp_path: Path) -> None:
    out = tmp_path / "minilm"
    result = CliRunner().invoke(main, ["models", "prepare", "all-MiniLM-L6-v2", "--task",
                                       "embed", "--out", str(out)], env=_env(tmp_path))
    assert result.exit_code == 0, result.output
    described = json.loads(result.stdout)
    assert described["path"] == str(out) and described["dimensions"] == 384
    manifest = read_manifest(out)
    assert (manifest.name, manifest.pooling, manifest.max_length) == ("all-minilm-l6-v2",
                                                                      "mean", 256)


def test_prepare_a_local_checkpoint_quantized(tmp_path: Path, tiny_reranker_dir: Path) -> None:
    src = _checkpoint(tmp_path, tiny_reranker_dir)
    result = CliRunner().invoke(main, ["models", "prepare", str(src), "--task", "rerank",
                                       "--quantize", "int8"], env=_env(tmp_path))
    assert result.exit_code == 0, result.output
    out = tmp_path / "state" / "models" / "my-cross-encoder"  # default: <state>/models/<name>
    manifest = read_manifest(out)
    assert (manifest.task, manifest.quantization, manifest.dimensions) == ("rerank", "int8", 1)
    scores = load_reranker(out).score("disk", ["replace the disk", "cats"])
    assert scores.shape == (2,) and np.isfinite(scores).all()


def test_prepare_failures_are_one_clear_line(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["models", "prepare", "BAAI/bge-m3", "--task", "embed",
                                       "--out", str(tmp_path / "m")], env=_env(tmp_path))
    assert result.exit_code == 2, result.output
    assert "error: cannot prepare BAAI/bge-m3" in result.stderr
    assert "Traceback" not in result.output


def test_model_host_check_loads_and_describes(
    tmp_path: Path, minilm_dir: Path, tiny_reranker_dir: Path
) -> None:
    env = _env(tmp_path, SIDECAR_EMBED_MODEL_PATH=str(minilm_dir),
               SIDECAR_RERANK_MODEL_PATH=str(tiny_reranker_dir))  # fmt: skip
    result = CliRunner().invoke(main, ["model-host", "--check"], env=env)
    assert result.exit_code == 0, result.output
    info = json.loads(result.stdout)
    assert info["model_type"] == {"embedding": {"pooling": "mean"}}
    assert set(info["models"]) == {"embed", "rerank"}
    only = CliRunner().invoke(main, ["model-host", "--check", "--task", "rerank"], env=env)
    assert set(json.loads(only.stdout)["models"]) == {"rerank"}


def test_model_host_refuses_missing_or_wrong_models(
    tmp_path: Path, minilm_dir: Path, tiny_reranker_dir: Path
) -> None:
    missing = tmp_path / "nothing-here"
    result = CliRunner().invoke(main, ["model-host"],
                                env=_env(tmp_path, SIDECAR_EMBED_MODEL_PATH=str(missing)))
    assert result.exit_code == 2
    assert str(missing / "manifest.json") in result.stderr and "not found" in result.stderr
    swapped = _env(tmp_path, SIDECAR_EMBED_MODEL_PATH=str(tiny_reranker_dir))
    result = CliRunner().invoke(main, ["model-host"], env=swapped)
    assert result.exit_code == 2 and "it is a 'rerank' model, expected 'embed'" in result.stderr
    result = CliRunner().invoke(main, ["model-host", "--task", "rerank"],
                                env=_env(tmp_path, SIDECAR_EMBED_MODEL_PATH=str(minilm_dir)))
    assert result.exit_code == 2 and "no cross-encoder configured" in result.stderr


def test_model_host_refuses_to_listen_beyond_loopback_without_a_key(tmp_path: Path) -> None:
    from pydantic import SecretStr

    from sidecar.cli.modelhost import check_bind
    from sidecar.config.settings import Settings
    from sidecar.errors import ConfigurationError

    for args, extra in ((["--host", "0.0.0.0"], {}), (["--host", "::"], {}),
                        ([], {"SIDECAR_MODEL_HOST_HOST": "192.0.2.10"})):
        result = CliRunner().invoke(main, ["model-host", *args], env=_env(tmp_path, **extra))
        assert result.exit_code == 2, result.output
        assert "without a key" in result.stderr and "SIDECAR_MODEL_HOST_API_KEY" in result.stderr
    plain = Settings()
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", "unix:/run/host.sock"):
        check_bind(plain, host)  # this machine only
    for host in ("0.0.0.0", "::", "10.0.0.5", "models.internal"):
        with pytest.raises(ConfigurationError, match="SIDECAR_MODEL_HOST_ALLOW_OPEN"):
            check_bind(plain, host)
    key = SecretStr("host-f547ae6f650db41e7b6984143bbdb163")
    check_bind(Settings(model_host_api_key=key), "0.0.0.0")
    check_bind(Settings(model_host_allow_open=True), "0.0.0.0")  # the operator said so


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _sidecar() -> list[str]:
    script = Path(sys.executable).with_name("sidecar")
    return [str(script)] if script.exists() else [sys.executable, "-c",
                                                  "from sidecar.cli import main; main()"]


@pytest.fixture
def gunicorn_host(tmp_path: Path, minilm_dir: Path, tiny_reranker_dir: Path) -> Iterator[str]:
    """`sidecar model-host` as operators run it: gunicorn gthread, in a subprocess."""
    port = _free_port()
    env = {**os.environ, **_env(tmp_path, SIDECAR_EMBED_MODEL_PATH=str(minilm_dir),
                                SIDECAR_RERANK_MODEL_PATH=str(tiny_reranker_dir),
                                SIDECAR_MODEL_HOST_PORT=str(port))}  # fmt: skip
    proc = subprocess.Popen([*_sidecar(), "model-host", "--threads", "4"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, proc.communicate()[0].decode()
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "the model host did not come up"
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_gunicorn_model_host_serves_tei(gunicorn_host: str, minilm: OnnxEmbedder) -> None:
    with httpx.Client(base_url=gunicorn_host, timeout=60) as http:
        assert http.get("/info").json()["model_id"] == "all-minilm-l6-v2"
        vectors = http.post("/embed", json={"inputs": ["hello", "bonjour"]}).json()
        np.testing.assert_allclose(vectors, minilm.embed(["hello", "bonjour"]), atol=1e-6)
        ranks = http.post("/rerank", json={"query": "q", "texts": ["a", "b"]}).json()
        assert sorted(r["index"] for r in ranks) == [0, 1]
        assert http.post("/embed", content=b"{oops").status_code == 400


def test_a_unix_socket_host_is_for_its_owner_and_group_only(tmp_path: Path,
                                                            minilm_dir: Path) -> None:
    """A unix socket counts as loopback (no key needed): gunicorn used to create it 0777, so
    any local user could call the model. It is srw-rw---- now."""
    socket_path = tmp_path / "run" / "host.sock"
    socket_path.parent.mkdir()
    env = {**os.environ, **_env(tmp_path, SIDECAR_EMBED_MODEL_PATH=str(minilm_dir))}
    proc = subprocess.Popen([*_sidecar(), "model-host", "--task", "embed", "--threads", "2",
                             "--host", f"unix:{socket_path}"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)  # fmt: skip
    try:
        transport = httpx.HTTPTransport(uds=str(socket_path))
        with httpx.Client(transport=transport, base_url="http://host", timeout=5) as http:
            deadline = time.monotonic() + 90
            while True:
                assert proc.poll() is None, proc.communicate()[0].decode()
                try:
                    if http.get("/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                assert time.monotonic() < deadline, "the model host did not come up"
                time.sleep(0.2)
            assert stat.S_IMODE(socket_path.stat().st_mode) == 0o660
            assert http.get("/metrics").status_code == 200  # this machine: no key needed
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_gunicorn_stops_when_a_model_cannot_load(tmp_path: Path, minilm_dir: Path) -> None:
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("manifest.json", TOKENIZER_FILE):
        shutil.copy2(minilm_dir / name, broken / name)
    (broken / "model.onnx").write_bytes(b"garbage")
    env = {**os.environ, **_env(tmp_path, SIDECAR_EMBED_MODEL_PATH=str(broken),
                                SIDECAR_MODEL_HOST_PORT=str(_free_port()))}  # fmt: skip
    done = subprocess.run([*_sidecar(), "model-host"], env=env, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 3  # gunicorn: "Worker failed to boot", no respawn loop
    assert f"cannot load model at {broken / 'model.onnx'}: checksum mismatch" in done.stderr
