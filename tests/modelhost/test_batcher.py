"""The micro-batcher groups concurrent requests into few model calls (counted, never timed)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import numpy as np
import pytest

from models import OnnxCrossEncoder, OnnxEmbedder
from models.host import MicroBatcher, ThreadedHost, create_host_app
from models.host.batcher import BatcherClosed, Overloaded
from tests.modelhost.conftest import Recording


def _wait_for(condition: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


class Calls:
    """A model function that records its batches; the first call may wait on a gate."""

    def __init__(self, gate: threading.Event | None = None, fail_on: str | None = None):
        self.batches: list[list[str]] = []
        self.gate = gate
        self.fail_on = fail_on

    def __call__(self, items: list[str]) -> Sequence[str]:
        self.batches.append(list(items))
        if len(self.batches) == 1 and self.gate is not None:
            assert self.gate.wait(30)
        if self.fail_on in items:
            raise RuntimeError(f"cannot compute {self.fail_on}")
        return [item.upper() for item in items]


def test_results_come_back_in_order_and_big_requests_are_split() -> None:
    calls = Calls()
    batcher = MicroBatcher(calls, max_batch=4, max_wait_ms=0, name="t")
    items = [f"item {i}" for i in range(10)]
    assert batcher.map(items, timeout=10) == [i.upper() for i in items]
    assert [len(b) for b in calls.batches] == [4, 4, 2]
    assert batcher.batches == 3
    batcher.close()


def test_concurrent_requests_share_model_calls() -> None:
    gate = threading.Event()
    calls = Calls(gate)
    batcher = MicroBatcher(calls, max_batch=64, max_wait_ms=2, name="t")
    with ThreadPoolExecutor(16) as pool:
        results = [pool.submit(batcher.map, [f"request {i}"], 30) for i in range(16)]
        # The first call holds the model; every other request queues behind it.
        _wait_for(lambda: calls.batches and batcher.pending + len(calls.batches[0]) == 16,
                  "16 queued requests")  # fmt: skip
        gate.set()
        answers = [r.result() for r in results]
    assert answers == [[f"REQUEST {i}"] for i in range(16)]
    assert len(calls.batches) == 2, calls.batches  # 16 requests, 2 model calls
    batcher.close()


def test_a_failing_batch_fails_only_its_own_requests() -> None:
    calls = Calls(fail_on="poison")
    batcher = MicroBatcher(calls, max_batch=8, max_wait_ms=0, name="t")
    with pytest.raises(RuntimeError, match="cannot compute poison"):
        batcher.map(["fine", "poison"], timeout=10)
    assert batcher.map(["fine again"], timeout=10) == ["FINE AGAIN"]
    assert batcher.alive
    batcher.close()


def test_an_announced_request_is_waited_for() -> None:
    calls = Calls()
    batcher: MicroBatcher[str, str] = MicroBatcher(calls, max_batch=8, max_wait_ms=30_000,
                                                   name="t")  # fmt: skip
    with batcher.incoming() as ticket:  # a request whose body is still being parsed
        early = batcher.submit(["early"])
        time.sleep(0.3)
        assert batcher.pending == 1  # held back: the announced request is on its way
        late = ticket.submit(["late"])
    assert [f.result(10) for f in early + late] == ["EARLY", "LATE"]
    assert calls.batches == [["early", "late"]]
    batcher.close()


def test_a_lone_request_does_not_wait() -> None:
    # With no concurrency in sight the batch runs at once, not after max_wait_ms (30 s here).
    batcher = MicroBatcher(Calls(), max_batch=8, max_wait_ms=30_000, name="t")
    assert batcher.submit(["alone"])[0].result(timeout=10) == "ALONE"
    with batcher.incoming() as ticket:
        pass  # a request that failed validation withdraws its announcement
    assert not ticket.submitted
    assert batcher.submit(["again"])[0].result(timeout=10) == "AGAIN"
    batcher.close()


def test_a_full_queue_is_refused_and_a_closed_batcher_too() -> None:
    gate = threading.Event()
    calls = Calls(gate)
    batcher = MicroBatcher(calls, max_batch=2, max_wait_ms=0, max_queue=4, name="t")
    first = batcher.submit(["a"])
    _wait_for(lambda: len(calls.batches) == 1, "the first call")
    batcher.submit(["b", "c", "d", "e"])
    with pytest.raises(Overloaded, match="queue is full"):
        batcher.submit(["f"])
    gate.set()
    assert first[0].result(10) == "A"
    batcher.close()
    assert not batcher.alive
    with pytest.raises(BatcherClosed):
        batcher.submit(["g"])


def test_http_requests_are_micro_batched(minilm: OnnxEmbedder) -> None:
    gate = threading.Event()
    model = Recording(minilm, gate)
    texts = [f"concurrent question number {i} about backups" for i in range(16)]
    with ThreadedHost(create_host_app(model)) as host, httpx.Client(base_url=host.url,
                                                                      timeout=60) as http:
        batcher = host.app.extensions["model_host"].embed.batcher

        def post(text: str) -> Any:
            return http.post("/embed", json={"inputs": [text]}).json()[0]

        with ThreadPoolExecutor(16) as pool:
            futures = [pool.submit(post, t) for t in texts]
            _wait_for(lambda: model.sizes and batcher.pending + model.sizes[0] == 16,
                      "16 requests queued at the host")  # fmt: skip
            gate.set()
            vectors = np.asarray([f.result() for f in futures], dtype=np.float32)
        metrics = http.get("/metrics").text
    assert sum(model.sizes) == 16 and len(model.sizes) <= 3, model.sizes
    np.testing.assert_allclose(vectors, minilm.embed(texts), atol=1e-5)
    assert 'model_host_batch_requests_bucket{le="16.0",model="embed"}' in metrics


def test_rerank_requests_with_different_queries_share_a_call(
    tiny_reranker: OnnxCrossEncoder,
) -> None:
    gate = threading.Event()
    model = Recording(tiny_reranker, gate)
    passages = ["replace the disk", "cats sleep a lot", "scrub the pool weekly"]
    queries = [f"question {i} about zfs" for i in range(8)]
    with ThreadedHost(create_host_app(None, model)) as host, httpx.Client(base_url=host.url,
                                                                            timeout=60) as http:
        batcher = host.app.extensions["model_host"].rerank.batcher

        def post(query: str) -> Any:
            body = {"query": query, "texts": passages, "raw_scores": True}
            return {r["index"]: r["score"] for r in http.post("/rerank", json=body).json()}

        with ThreadPoolExecutor(8) as pool:
            futures = [pool.submit(post, q) for q in queries]
            _wait_for(lambda: model.sizes and batcher.pending + model.sizes[0] == 24,
                      "8 rerank requests queued")  # fmt: skip
            gate.set()
            answers = [f.result() for f in futures]
    assert len(model.sizes) <= 3 and sum(model.sizes) == 24, model.sizes
    for query, scores in zip(queries, answers, strict=True):
        expected = tiny_reranker.score(query, passages)
        np.testing.assert_allclose([scores[i] for i in range(3)], expected, atol=1e-5)
