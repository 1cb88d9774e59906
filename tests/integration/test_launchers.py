"""Every gunicorn launcher takes its options from sidecar.api.gunicorn_config.

`gunicorn -c deploy/gunicorn.conf.py`, `sidecar serve`, `sidecar run` and `sidecar model-host`
must agree on graceful shutdown, trusted proxies, logging and the worker count they are given.
The launchers run for real up to gunicorn's ``run()``, which is replaced by a recorder: what is
compared is the configuration gunicorn itself holds.
"""

from __future__ import annotations

import runpy
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from gunicorn.config import Config

from models import make_tiny_cross_encoder
from sidecar.api.gunicorn_config import (
    GunicornApp,
    api_options,
    common_options,
    model_host_options,
)
from sidecar.cli import main
from sidecar.cli.run import _serve
from sidecar.config.settings import Settings, load_settings
from tests.conftest import API_KEY, make_settings

DEPLOY_CONF = Path(__file__).resolve().parents[2] / "deploy" / "gunicorn.conf.py"


def _effective(cfg: Config) -> dict[str, Any]:
    return {name: setting.get() for name, setting in cfg.settings.items()}


@pytest.fixture
def launched(monkeypatch: pytest.MonkeyPatch) -> list[GunicornApp]:
    """The gunicorn apps the launchers would run, recorded instead of run."""
    apps: list[GunicornApp] = []
    monkeypatch.setattr(GunicornApp, "run", lambda self: apps.append(self))
    return apps


def _never() -> Any:
    raise AssertionError("not loaded")


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"SIDECAR_STATE_DIR": str(tmp_path / "state"), "SIDECAR_API_KEY": API_KEY,
            "SIDECAR_WORKERS": "3", "SIDECAR_THREADS": "5", "SIDECAR_PORT": "18340",
            "SIDECAR_LOG_LEVEL": "WARNING", **extra}


def test_the_deploy_file_is_sidecar_serve(tmp_path: Path, db_url: str, redis_url: str,
                                          minilm_dir: Path, launched: list[GunicornApp],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    env = _env(tmp_path, DATABASE_URL=db_url, REDIS_URL=redis_url,
               SIDECAR_EMBED_MODEL_PATH=str(minilm_dir))
    result = CliRunner().invoke(main, ["serve"], env=env)
    assert result.exit_code == 0, result.output
    [served] = launched
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    # What gunicorn does with a config file: every name it knows becomes a setting.
    from_file = Config()
    for name, value in runpy.run_path(str(DEPLOY_CONF)).items():
        if name in from_file.settings:
            from_file.set(name, value)
    deployed, serving = _effective(from_file), _effective(served.cfg)
    assert deployed.pop("wsgi_app") == "sidecar.api.app:create_app()"
    serving.pop("wsgi_app")
    assert deployed == serving
    assert (serving["workers"], serving["threads"], serving["bind"]) == (3, 5, ["127.0.0.1:18340"])
    assert serving["graceful_timeout"] == 30
    # No SIDECAR_PROXY_HOPS: no proxy's X-Forwarded-Proto is believed, not even gunicorn's.
    assert serving["forwarded_allow_ips"] == []


def test_sidecar_run_serves_with_the_api_options(tmp_path: Path, db_url: str, redis_url: str,
                                                 launched: list[GunicornApp]) -> None:
    settings = make_settings(tmp_path, db_url, redis_url, workers=4)
    _serve(settings, 1)  # `sidecar run --workers 1`
    [app] = launched
    assert app.options == api_options(settings, 1)
    assert app.cfg.workers == 1 and app.cfg.settings["on_starting"].get() is not None


def test_the_model_host_shares_the_common_options(tmp_path: Path,
                                                  launched: list[GunicornApp]) -> None:
    reranker = tmp_path / "tiny-ce"
    make_tiny_cross_encoder(reranker, seed=1)
    env = _env(tmp_path, SIDECAR_RERANK_MODEL_PATH=str(reranker))
    result = CliRunner().invoke(main, ["model-host", "--task", "rerank", "--workers", "2",
                                       "--port", "18341"], env=env)
    assert result.exit_code == 0, result.output
    [host] = launched
    settings = Settings(log_level="WARNING")
    assert host.options == model_host_options(settings, port=18341, workers=2)
    api = _effective(GunicornApp(api_options(settings), _never).cfg)
    hosting = _effective(host.cfg)
    for key in common_options(settings):
        assert hosting[key] == api[key], key
    assert (hosting["workers"], hosting["bind"]) == (2, ["127.0.0.1:18341"])
    # The worker's loader builds the host over the configured model.
    app = host.load()
    try:
        assert app.test_client().get("/health").status_code == 200
    finally:
        from models.host import close_host_app

        close_host_app(app)


def test_settings_reach_every_launcher() -> None:
    settings = load_settings().model_copy(update={"log_level": "DEBUG"})
    for options in (api_options(settings), model_host_options(settings)):
        assert options["loglevel"] == "debug"
        assert options.items() >= common_options(settings).items()
