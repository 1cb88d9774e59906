"""Load on the model host: N concurrent HTTP clients, each sending small /embed requests.

The host runs as operators run it — ``sidecar model-host`` (gunicorn, gthread worker) in its own
process — so the clients' Python work and the host's do not share one interpreter lock.
"""

from __future__ import annotations

import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from sidecar.bench.procs import wait_healthy


@dataclass(frozen=True)
class LoadResult:
    """What N clients got from the host in a fixed time."""

    clients: int
    seconds: float
    requests: int
    texts: int
    latencies: list[float]
    model_calls: int
    model_seconds: float
    """Time the host spent in model calls (its own CPU work, without HTTP)."""

    @property
    def texts_per_s(self) -> float:
        return self.texts / self.seconds

    @property
    def requests_per_s(self) -> float:
        return self.requests / self.seconds

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.latencies) * 1000

    @property
    def texts_per_call(self) -> float:
        return self.texts / max(1, self.model_calls)

    @property
    def model_ms_per_text(self) -> float:
        return 1000 * self.model_seconds / max(1, self.texts)


def host_counters(url: str) -> tuple[int, float]:
    """Model calls made so far and seconds spent in them, from the host's /metrics."""
    text = httpx.get(f"{url}/metrics", timeout=30).text

    def value(name: str) -> float:
        match = re.search(rf'^{name}\{{model="embed"\}} ([0-9.e+-]+)$', text, re.M)
        return float(match.group(1)) if match else 0.0

    return int(value("model_host_batch_items_count")), value("model_host_inference_seconds_sum")


@contextmanager
def model_host_process(model_dir: Path, threads: int, env: dict[str, str],
                       timeout: float = 120.0, workers: int = 1) -> Iterator[str]:  # fmt: skip
    """``sidecar model-host`` serving ``model_dir`` on a free port; yields its URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    environment = {**os.environ, **env, "SIDECAR_EMBED_MODEL_PATH": str(model_dir),
                   "SIDECAR_MODEL_HOST_HOST": "127.0.0.1", "SIDECAR_MODEL_HOST_PORT": str(port),
                   "SIDECAR_ONNX_THREADS": str(threads), "SIDECAR_LOG_LEVEL": "WARNING"}
    command = [sys.executable, "-c", "from sidecar.cli import main; main()", "model-host",
               "--task", "embed", "--threads", "16", "--workers", str(workers)]  # fmt: skip
    proc = subprocess.Popen(command, env=environment, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    try:
        try:
            wait_healthy(f"{url}/health", proc, timeout)
        except RuntimeError as exc:
            if proc.poll() is not None:
                raise RuntimeError(f"the model host exited: {proc.communicate()[1][-2000:]}"
                                   ) from exc
            raise
        yield url
    finally:
        proc.terminate()
        try:
            proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def run_load(url: str, texts: list[str], clients: int, per_request: int, seconds: float,
             counters: Callable[[], tuple[int, float]]) -> LoadResult:  # fmt: skip
    """``clients`` threads post ``per_request`` texts at a time for ``seconds``.

    Every client has its own keep-alive connection and waits for each answer before sending
    the next request (a closed loop, like sidecar workers). ``counters()`` reads the host's
    model calls and model seconds, before and after.
    """
    barrier = threading.Barrier(clients + 1)
    stop_at = [0.0]
    latencies: list[list[float]] = [[] for _ in range(clients)]
    errors: list[BaseException] = []

    def client(number: int) -> None:
        try:
            with httpx.Client(base_url=url, timeout=120) as http:
                offset = number * 97
                barrier.wait()
                while time.perf_counter() < stop_at[0]:
                    batch = [texts[(offset + k) % len(texts)] for k in range(per_request)]
                    offset += per_request
                    start = time.perf_counter()
                    response = http.post("/embed", json={"inputs": batch, "truncate": True})
                    response.raise_for_status()
                    latencies[number].append(time.perf_counter() - start)
        except BaseException as exc:  # reported by the caller, never swallowed
            errors.append(exc)
            if barrier.n_waiting:
                barrier.abort()

    threads = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(clients)]
    for thread in threads:
        thread.start()
    calls_before, seconds_before = counters()
    started = time.perf_counter()
    stop_at[0] = started + seconds
    barrier.wait()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise RuntimeError(f"load client failed: {errors[0]!r}") from errors[0]
    done = [x for lat in latencies for x in lat]
    calls_after, seconds_after = counters()
    return LoadResult(clients=clients, seconds=elapsed, requests=len(done),
                      texts=len(done) * per_request, latencies=done,
                      model_calls=calls_after - calls_before,
                      model_seconds=seconds_after - seconds_before)  # fmt: skip
