"""Micro-batching: concurrent requests share one model call, as in TEI and infinity.

One worker thread per model owns every model call. Request threads put their items (texts, or
query/passage pairs) in a queue and wait on futures; the worker takes up to ``max_batch`` items
at a time, runs ONE model call for them, and hands each item its result. A request bigger than
``max_batch`` is simply spread over several calls, and items of several requests share a call.

When to close a batch: a lone client must not pay a fixed delay on every request, and
concurrent clients must not be cut into batches of one. So the worker runs a batch at once
unless there is evidence of concurrency — a request that has arrived but not yet queued its
items (its JSON is being parsed), or a previous batch that mixed several requests — and then
waits at most ``max_wait_ms`` for more items. While a batch runs, new items pile up in the
queue and form the next batch (continuous batching), which is where most of the gain comes
from under load.

The design fits gunicorn's gthread worker: one process, many request threads, one model
session per process that only the worker thread touches (ONNX Runtime parallelises inside the
call with its own intra-op threads and releases the GIL while it runs).
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


class Overloaded(Exception):
    """The queue is full: the host answers 429, as TEI does."""


class BatcherClosed(Exception):
    """The batcher was closed; no more items are accepted."""


@dataclass(frozen=True, slots=True)
class BatchStats:
    """What one model call did, for metrics."""

    items: int
    requests: int
    queue_seconds: float
    """How long the oldest item of the batch waited in the queue."""
    run_seconds: float


@dataclass(slots=True)
class _Job(Generic[T, R]):
    item: T
    ticket: int
    future: Future[R]
    enqueued: float


class Ticket(Generic[T, R]):
    """A request announced to the batcher; :meth:`submit` queues its items once validated."""

    def __init__(self, batcher: MicroBatcher[T, R], number: int) -> None:
        self._batcher = batcher
        self.number = number
        self.submitted = False

    def submit(self, items: Sequence[T]) -> list[Future[R]]:
        """Queue ``items``; returns one future per item, in order."""
        futures = self._batcher._enqueue(items, self.number, announced=True)
        self.submitted = True
        return futures


class MicroBatcher(Generic[T, R]):
    """Groups items from concurrent requests into model calls of at most ``max_batch`` items.

    ``run`` gets a list of items and must return one result per item, in order; it is only ever
    called from the worker thread. An exception in ``run`` fails the futures of that batch only.
    """

    def __init__(
        self,
        run: Callable[[list[T]], Sequence[R]],
        *,
        max_batch: int = 64,
        max_wait_ms: float = 5.0,
        max_queue: int = 4096,
        name: str = "model",
        on_batch: Callable[[BatchStats], None] | None = None,
    ) -> None:
        if max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {max_batch}")
        if max_wait_ms < 0:
            raise ValueError(f"max_wait_ms must be >= 0, got {max_wait_ms}")
        if max_queue < max_batch:
            raise ValueError("max_queue must be >= max_batch")
        self._run = run
        self.max_batch = max_batch
        self.max_wait = max_wait_ms / 1000.0
        self.max_queue = max_queue
        self.name = name
        self._on_batch = on_batch
        self._queue: deque[_Job[T, R]] = deque()
        self._cond = threading.Condition()
        self._announced = 0
        self._last_batch_requests = 0
        self._tickets = itertools.count(1)
        self._closed = False
        self._thread: threading.Thread | None = None
        self.batches = 0
        """Model calls made so far."""

    # -- request side --------------------------------------------------------------------------

    @contextmanager
    def incoming(self) -> Iterator[Ticket[T, R]]:
        """Announce a request before its body is parsed, so the worker waits for its items.

        Leaving the block without :meth:`Ticket.submit` (a validation error) withdraws it.
        """
        with self._cond:
            self._announced += 1
        ticket: Ticket[T, R] = Ticket(self, next(self._tickets))
        try:
            yield ticket
        finally:
            if not ticket.submitted:
                with self._cond:
                    self._announced -= 1
                    self._cond.notify_all()

    def submit(self, items: Sequence[T]) -> list[Future[R]]:
        """Queue the items of an unannounced request."""
        return self._enqueue(items, next(self._tickets), announced=False)

    def map(self, items: Sequence[T], timeout: float | None = None) -> list[R]:
        """Submit ``items`` and wait for their results (raises the batch's exception)."""
        return [f.result(timeout) for f in self.submit(items)]

    def _enqueue(self, items: Sequence[T], ticket: int, *, announced: bool) -> list[Future[R]]:
        now = time.perf_counter()
        jobs: list[_Job[T, R]] = [_Job(item, ticket, Future(), now) for item in items]
        with self._cond:
            if announced:
                self._announced -= 1
            if self._closed:
                self._cond.notify_all()
                raise BatcherClosed(f"the {self.name} batcher is closed")
            if len(self._queue) + len(jobs) > self.max_queue:
                self._cond.notify_all()
                raise Overloaded(
                    f"{self.name} queue is full ({len(self._queue)} items waiting, "
                    f"limit {self.max_queue}); retry later"
                )
            self._queue.extend(jobs)
            self._ensure_worker()
            self._cond.notify_all()
        return [job.future for job in jobs]

    # -- worker side ---------------------------------------------------------------------------

    def _ensure_worker(self) -> None:
        # Started lazily (under the lock) so that it is created after gunicorn's fork.
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(
                target=self._work, name=f"batcher-{self.name}", daemon=True
            )
            self._thread.start()

    def _take(self) -> list[_Job[T, R]] | None:
        """Block until a batch is ready; None once closed and drained."""
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            if not self._queue:
                return None
            deadline = time.perf_counter() + self.max_wait
            while (
                len(self._queue) < self.max_batch
                and not self._closed
                and (self._announced > 0 or self._last_batch_requests > 1)
            ):
                remaining = deadline - time.perf_counter()
                if remaining <= 0:
                    break
                self._cond.wait(remaining)
            count = min(self.max_batch, len(self._queue))
            batch = [self._queue.popleft() for _ in range(count)]
            self._last_batch_requests = len({job.ticket for job in batch})
            return batch

    def _work(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            # A request that timed out or was abandoned cancels nothing: its items still run,
            # but a future already cancelled is skipped here.
            live = [job for job in batch if job.future.set_running_or_notify_cancel()]
            if not live:
                continue
            started = time.perf_counter()
            try:
                results = self._run([job.item for job in live])
                if len(results) != len(live):
                    raise RuntimeError(
                        f"{self.name} returned {len(results)} results for {len(live)} items"
                    )
            except Exception as exc:  # handed to the waiting requests, never lost
                log.error("%s batch of %d items failed: %s", self.name, len(live), exc)
                for job in live:
                    job.future.set_exception(exc)
            else:
                for job, result in zip(live, results, strict=True):
                    job.future.set_result(result)
            finished = time.perf_counter()
            self.batches += 1
            if self._on_batch is not None:
                self._on_batch(BatchStats(
                    items=len(live), requests=len({job.ticket for job in live}),
                    queue_seconds=started - min(job.enqueued for job in live),
                    run_seconds=finished - started,
                ))

    # -- lifecycle -----------------------------------------------------------------------------

    @property
    def pending(self) -> int:
        """Items waiting in the queue (not yet taken by the worker)."""
        with self._cond:
            return len(self._queue)

    @property
    def alive(self) -> bool:
        """False once closed, or when the worker died (the host reports itself unhealthy)."""
        if self._closed:
            return False
        return self._thread is None or self._thread.is_alive()

    def close(self, timeout: float = 5.0) -> None:
        """Stop accepting items, finish the queued ones, and stop the worker."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
