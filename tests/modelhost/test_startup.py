"""Start-up with models: the registry refuses other dimensions, broken models say where and why."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from models import DummyEmbedder, OnnxEmbedder
from models.client import RemoteEmbedder
from models.host import ThreadedHost
from sidecar.api.app import create_app
from sidecar.errors import ConfigurationError, Conflict
from sidecar.runtime.resources import start_resources
from tests.conftest import API_KEY, make_settings

AUTH = {"Authorization": f"Bearer {API_KEY}"}


def _broken_copy(model_dir: Path, target: Path) -> Path:
    """The model's manifest and tokenizer, with a corrupt ONNX graph."""
    target.mkdir()
    for name in ("manifest.json", "tokenizer.json"):
        shutil.copy2(model_dir / name, target / name)
    (target / "model.onnx").write_bytes(b"not an onnx graph")
    return target


def test_a_model_with_other_dimensions_is_refused(
    tmp_path: Path, db_url: str, redis_url: str
) -> None:
    settings = make_settings(tmp_path, db_url, redis_url)
    start_resources(settings, embedder=DummyEmbedder(16, name="forum-model")).close()
    same = start_resources(settings, embedder=DummyEmbedder(16, name="forum-model"))
    assert same.model.dimensions == 16
    same.close()
    with pytest.raises(Conflict, match="stored with 16 dimensions but the loaded model has 32"):
        start_resources(settings, embedder=DummyEmbedder(32, name="forum-model"))


def test_a_broken_embedding_model_stops_start_up_with_path_and_reason(
    tmp_path: Path, db_url: str, redis_url: str, minilm_dir: Path
) -> None:
    broken = _broken_copy(minilm_dir, tmp_path / "broken")
    settings = make_settings(tmp_path, db_url, redis_url, embed_model_path=broken)
    with pytest.raises(ConfigurationError) as caught:
        start_resources(settings)
    assert str(broken / "model.onnx") in caught.value.message
    assert "checksum mismatch" in caught.value.message
    empty = tmp_path / "empty"
    empty.mkdir()
    settings = make_settings(tmp_path, db_url, redis_url, embed_model_path=empty)
    with pytest.raises(ConfigurationError, match=f"no prepared model in {empty}"):
        start_resources(settings)


def test_a_broken_reranker_degrades_and_says_where_and_why(
    tmp_path: Path, db_url: str, redis_url: str, minilm: OnnxEmbedder,
    tiny_reranker_dir: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    broken = _broken_copy(tiny_reranker_dir, tmp_path / "broken-ce")
    settings = make_settings(tmp_path, db_url, redis_url, rerank_model_path=broken)
    with caplog.at_level(logging.ERROR, logger="sidecar.runtime.resources"):
        res = start_resources(settings, embedder=minilm)
    assert res.reranker is None and res.reranker_error is not None
    assert str(broken / "model.onnx") in res.reranker_error
    assert any(str(broken) in r.getMessage() and "checksum" in r.getMessage()
               for r in caplog.records)  # fmt: skip
    health = create_app(settings, res).test_client().get("/v1/health", headers=AUTH).json
    assert "checksum mismatch" in health["models"]["reranker"]["error"]
    res.close()


def test_the_sidecar_uses_a_model_host_named_by_settings(
    tmp_path: Path, db_url: str, redis_url: str, served: ThreadedHost
) -> None:
    settings = make_settings(tmp_path, db_url, redis_url, embed_url=served.url,
                             embed_model="all-minilm-l6-v2", rerank_url=served.url)  # fmt: skip
    res = start_resources(settings)
    try:
        assert isinstance(res.embedder, RemoteEmbedder)
        assert (res.model.name, res.model.dimensions) == ("all-minilm-l6-v2", 384)
        models: dict[str, Any] = create_app(settings, res).test_client().get(
            "/v1/health", headers=AUTH).json["models"]
        assert models["embedder"]["provider"] == "cpu"
        assert models["reranker"] == {"name": "tiny-cross-encoder-seed3", "provider": "cpu"}
        assert res.reranker is not None
        assert res.reranker.score("zfs", ["zfs pool", "cats"]).shape == (2,)
    finally:
        res.close()


def test_an_unreachable_model_host_stops_start_up_clearly(
    tmp_path: Path, db_url: str, redis_url: str
) -> None:
    settings = make_settings(tmp_path, db_url, redis_url, embed_url="http://127.0.0.1:9")
    with pytest.raises(ConfigurationError, match=r"model host http://127.0.0.1:9: cannot reach"):
        start_resources(settings)


def test_a_model_host_that_goes_down_is_a_503_not_a_500(
    tmp_path: Path, db_url: str, redis_url: str, minilm: OnnxEmbedder
) -> None:
    from models.host import create_host_app

    host = ThreadedHost(create_host_app(minilm)).start()
    settings = make_settings(tmp_path, db_url, redis_url, embed_url=host.url,
                             embed_model=minilm.name)  # fmt: skip
    res = start_resources(settings)
    try:
        client = create_app(settings, res).test_client()
        auth = {"Authorization": f"Bearer {API_KEY}"}
        assert client.post("/v1/search", json={"query": "zfs"}, headers=auth).status_code == 200
        host.stop()
        resp = client.post("/v1/search", json={"query": "zfs"}, headers=auth)
        assert resp.status_code == 503, resp.json
        assert resp.json["error"]["code"] == "service_unavailable"
        assert host.url not in resp.json["error"]["message"]  # internal addresses stay inside
        keyword = client.post("/v1/search", json={"query": "zfs", "mode": "keyword"},
                              headers=auth)  # fmt: skip
        assert keyword.status_code == 200  # no model needed, still served
    finally:
        res.close()
