"""Fixtures of the jobs tests: a writable demo forum on real PostgreSQL and Redis, and helpers.

Every test gets its own database and a flushed Redis; nothing here touches the session's
read-only ``demo_state``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from jobs import driver
from jobs.batch import run_sync
from models import DummyEmbedder
from sidecar.runtime.resources import Resources
from tests.conftest import import_demo, make_settings, sidecar_url

# Small batches so that the demo forum (~250 public posts) makes a run of many batches.
JOB_SETTINGS: dict[str, Any] = {
    "backfill_batch_size": 16,
    "job_retries": 2,
    "job_retry_intervals": "0",
    "backfill_pause_after_errors": 3,
}


def start_state(tmp_path: Path, db_url: str, redis_url: str, embedder: Any,
                **overrides: Any) -> Resources:
    """Resources over a fresh database holding the demo forum (not embedded yet), as the
    sidecar's least-privilege role (``db_url`` stays the owner's: the forum's writer)."""
    from sidecar.runtime.bootstrap import sync_keyword
    from sidecar.runtime.resources import start_resources

    settings = make_settings(tmp_path, db_url, redis_url, **{**JOB_SETTINGS, **overrides})
    import_demo(db_url, settings.ts_config)
    settings = settings.model_copy(update={"database_url": sidecar_url(db_url)})
    res = start_resources(settings, embedder=embedder, purpose="worker")
    sync_keyword(res)
    return res


@pytest.fixture
def demo_res(tmp_path: Path, db_url: str, redis_client: Any, redis_url: str,
             minilm: Any) -> Iterator[Resources]:
    """The demo forum with MiniLM, nothing embedded, an empty Redis."""
    res = start_state(tmp_path, db_url, redis_url, minilm)
    yield res
    res.close()


@pytest.fixture
def dummy_res(tmp_path: Path, db_url: str, redis_client: Any, redis_url: str
              ) -> Iterator[Resources]:
    """The demo forum with the (fast, deterministic) DummyEmbedder, nothing embedded."""
    res = start_state(tmp_path, db_url, redis_url, DummyEmbedder(dimensions=32))
    yield res
    res.close()


@pytest.fixture
def indexed(dummy_res: Resources) -> Iterator[Resources]:
    """The demo forum fully embedded (strategy 1, the dummy embedder)."""
    run = run_sync(dummy_res, driver.start_run(dummy_res, enqueue=False).id)
    assert run.stop_reason == "done"
    yield dummy_res


def work(res: Resources, heartbeat_ttl: int = 10) -> bool:
    """A burst SidecarWorker in this process, until the queues are empty."""
    from jobs.worker import run_worker

    return run_worker(res, burst=True, heartbeat_ttl=heartbeat_ttl)


def public_post_ids(url: str) -> set[int]:
    """Every public post of the forum, by the one public filter."""
    from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE

    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute(
            f"SELECT p.id FROM posts p {PUBLIC_JOINS} WHERE {PUBLIC_WHERE}")}


def private_post_ids(url: str) -> set[int]:
    """Every post that is not public (deleted, hidden, whisper, PM, restricted, unlisted)."""
    with psycopg.connect(url) as conn:
        every = {r[0] for r in conn.execute("SELECT id FROM posts")}
    return every - public_post_ids(url)


def vector_rows(url: str, model_id: int, strategy: int = 1) -> list[tuple[int, str]]:
    """(post_id, digest) of every stored vector of a (model, strategy), duplicates included."""
    with psycopg.connect(url) as conn:
        return [(r[0], r[1]) for r in conn.execute(
            "SELECT post_id, digest FROM ai_posts_embeddings WHERE model_id = %s"
            " AND strategy_id = %s ORDER BY post_id", (model_id, strategy))]


def run_record(res: Resources, run_id: int) -> Any:
    """The stored run."""
    from sidecar.db.backfill_runs import get_run

    with res.db.connection() as conn:
        return get_run(conn, run_id)


class FailingEmbedder:
    """A stand-in for a model provider (the MODEL is the test double, never the DB or queue).

    Raises ``ProviderError``s with ``status`` and ``terminal`` like ``models.client`` does, for
    the first ``fail_times`` calls (all calls if None), then embeds with the wrapped embedder.
    """

    def __init__(self, inner: Any, *, status: int, terminal: bool,
                 fail_times: int | None = None) -> None:
        self.inner = inner
        self.status = status
        self.terminal = terminal
        self.fail_times = fail_times
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def embed(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
        self.calls += 1
        if self.fail_times is None or self.calls <= self.fail_times:
            raise ProviderError(self.status, self.terminal)
        result: np.ndarray = self.inner.embed(texts, kind=kind)
        return result


class ProviderError(Exception):
    """Shaped like the remote embedder's error: HTTP status and whether retrying can help."""

    def __init__(self, status: int, terminal: bool) -> None:
        super().__init__(f"model host answered {status}")
        self.status = status
        self.terminal = terminal
