"""One resources object per process: started with or without models, installed explicitly.

On real PostgreSQL and Redis: resources started without models enqueue a run for the registered
model and refuse to embed; the services built on resources are built once per object; a plain
RQ worker (not `sidecar worker`) finds nothing installed, starts the resources from the
environment on its first job, says so, and works the run.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from pathlib import Path
from typing import Any

import pytest
from rq import SimpleWorker

from jobs import context, driver
from jobs.queues import all_queues, queue
from sidecar.errors import ConfigurationError
from sidecar.runtime.resources import Resources, start_resources
from tests.conftest import make_settings
from tests.jobs.conftest import JOB_SETTINGS, run_record, start_state, vector_rows

MODEL = "all-minilm-l6-v2"


def test_resources_without_models_enqueue_for_the_registered_model_and_refuse_to_embed(
    tmp_path: Path, db_url: str, redis_client: Any, redis_url: str, minilm_dir: Path,
) -> None:
    settings = make_settings(tmp_path, db_url, redis_url, embed_model=MODEL,
                             embed_model_path=minilm_dir)
    res = start_resources(settings, load_models=False)
    try:
        # Registered from the prepared model's manifest, without loading it.
        assert res.loaded is None
        assert (res.model.name, res.model.dimensions) == (MODEL, 384)
        with pytest.raises(ConfigurationError, match="without models"):
            _ = res.embedder
        run = driver.start_run(res)  # what `sidecar backfill` does, then it watches
        assert run.model_id == res.model.id
        assert queue(res.redis, res.settings, "backfill").count == 1
    finally:
        res.close()


def test_services_are_built_once_per_resources_object(demo_state: Resources) -> None:
    res = dataclasses.replace(demo_state)  # a copy: the session's object keeps no services
    built: list[Any] = []
    start = threading.Barrier(8)

    def ask() -> None:
        start.wait()
        built.append(res.moderation())

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(built) == 8 and all(service is built[0] for service in built)
    assert res.sanitizer() is res.sanitizer()
    assert res.retrieval() is res.retrieval()
    assert res.indexer(res.model, 1).embedder is res.embedder
    # A copy (tests vary settings this way) builds its own.
    assert dataclasses.replace(res).moderation() is not built[0]


def test_a_plain_rq_worker_starts_the_resources_itself_and_says_so(
    tmp_path: Path, db_url: str, redis_client: Any, redis_url: str, minilm: Any,
    minilm_dir: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
) -> None:
    res = start_state(tmp_path, db_url, redis_url, minilm)
    environment = {"DATABASE_URL": db_url, "REDIS_URL": redis_url,
                   "SIDECAR_STATE_DIR": str(res.settings.state_dir),
                   "SIDECAR_EMBED_MODEL": MODEL, "SIDECAR_EMBED_MODEL_PATH": str(minilm_dir),
                   **{f"SIDECAR_{k.upper()}": str(v) for k, v in JOB_SETTINGS.items()}}
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert context.installed() is None
    started: Resources | None = None
    try:
        run = driver.start_run(res, budget=20)
        worker = SimpleWorker(all_queues(res.redis, res.settings), connection=res.redis)
        with caplog.at_level(logging.WARNING, logger="jobs.context"):
            assert worker.work(burst=True)
        started = context.installed()
        assert started is not None and started is not res
        assert started.embedder.name == MODEL
        said = [r.getMessage() for r in caplog.records if r.name == "jobs.context"]
        assert len(said) == 1 and "plain `rq worker`" in said[0]  # once per process
        done = run_record(res, run.id)
        assert (done.status, done.done) == ("finished", 20)
        assert len(vector_rows(db_url, res.model.id)) == 20
    finally:
        context.uninstall()
        if started is not None:
            started.close()
        res.close()
