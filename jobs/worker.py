"""``sidecar worker``: an RQ SimpleWorker with the models preloaded, a heartbeat and a scheduler.

- No fork per job (``SimpleWorker``): ONNX Runtime sessions do not survive a fork, and loading a
  model per job would cost seconds each time.
- A heartbeat thread keeps the running job's entry in RQ's StartedJobRegistry alive with a
  short TTL. A worker killed with SIGKILL stops beating, so its job is found abandoned within
  about two TTLs (instead of the job timeout plus a minute, RQ's SimpleWorker default) and is
  retried; :func:`jobs.driver.reconcile`, run at start-up and at each maintenance, re-enqueues
  whatever else a dead worker left behind.
- Retries with backoff are scheduled jobs: a scheduler thread moves them back to their queue
  when due (RQ's own scheduler would fork a process off this one).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from typing import Any

import redis
from rq import SimpleWorker
from rq.job import Job
from rq.queue import Queue
from rq.scheduler import RQScheduler
from rq.worker import WorkerStatus

from jobs import context, driver, queues
from sidecar.runtime.resources import Resources

log = logging.getLogger(__name__)

DEFAULT_HEARTBEAT_TTL = 60


class SidecarWorker(SimpleWorker):
    """A SimpleWorker whose running jobs send heartbeats with a short TTL."""

    def __init__(self, *args: Any, res: Resources | None = None,
                 heartbeat_ttl: int = DEFAULT_HEARTBEAT_TTL, **kwargs: Any) -> None:
        # Maintenance (abandoned-job cleanup, reconcile) runs about once per heartbeat TTL.
        kwargs.setdefault("maintenance_interval", max(2, heartbeat_ttl))
        super().__init__(*args, **kwargs)
        self.heartbeat_ttl = max(2, int(heartbeat_ttl))
        self.res = res

    def get_heartbeat_ttl(self, job: Job, working_time: float = 0.0) -> int:
        """The TTL of the running job's registry entry, renewed by the heartbeat thread."""
        return self.heartbeat_ttl

    def execute_job(self, job: Job, queue: Queue) -> None:
        """Run the job in this process while a thread renews its heartbeat."""
        execution = self.prepare_execution(job)
        stop = threading.Event()
        beat = threading.Thread(target=self._beat, args=(job, execution, stop),
                                name=f"heartbeat-{job.id}", daemon=True)
        beat.start()
        try:
            self.perform_job(job, queue, execution)
        finally:
            stop.set()
            beat.join()
        self.set_state(WorkerStatus.IDLE)

    def _beat(self, job: Job, execution: Any, stop: threading.Event) -> None:
        while not stop.wait(self.heartbeat_ttl / 3):
            try:
                self.maintain_heartbeats(job, execution)
            except redis.RedisError as exc:  # a missed beat is retried at the next tick
                log.warning("heartbeat of job %s failed: %s", job.id, exc)

    def run_maintenance_tasks(self) -> None:
        """RQ's registry cleanup (abandoned jobs), then the backfill runs' reconciliation."""
        super().run_maintenance_tasks()
        if self.res is not None:
            try:
                driver.reconcile(self.res)
            except Exception:  # maintenance must not kill the worker; it runs again soon
                log.exception("reconciling backfill runs failed")


class SchedulerThread(threading.Thread):
    """Moves due scheduled jobs (retries with backoff) back to their queues, in this process."""

    def __init__(self, queue_names: list[str], connection: redis.Redis,
                 interval: float = 1.0, logging_level: str = "INFO") -> None:
        super().__init__(name="rq-scheduler", daemon=True)
        self.scheduler = RQScheduler(queue_names, connection=connection, interval=1,
                                     logging_level=logging_level)
        self.wanted = set(queue_names)
        self.interval = interval
        self.stopped = threading.Event()

    def tick(self) -> None:
        """Take the scheduler locks if free (another worker may hold them), move due jobs."""
        try:
            if self.scheduler.acquired_locks != self.wanted:
                self.scheduler.acquire_locks()
            if self.scheduler.acquired_locks:
                self.scheduler.heartbeat()
                self.scheduler.enqueue_scheduled_jobs()
        except redis.RedisError as exc:
            log.warning("scheduler tick failed: %s", exc)

    def run(self) -> None:
        """Tick every ``interval`` until stopped."""
        while not self.stopped.wait(self.interval):
            self.tick()
        self.scheduler.release_locks()
        self.scheduler.register_death()

    def stop(self) -> None:
        """Release the locks and end the thread."""
        self.stopped.set()
        self.join(timeout=5)


def worker_name() -> str:
    """Host and pid: readable in ``rq info`` and unique across restarts."""
    return f"sidecar.{socket.gethostname()}.{os.getpid()}"


def run_worker(res: Resources, *, burst: bool = False, kinds: tuple[str, ...] = queues.KINDS,
               heartbeat_ttl: int = DEFAULT_HEARTBEAT_TTL, name: str | None = None) -> bool:
    """Install ``res`` for the jobs and work the queues until stopped (or empty: burst).

    Returns whether any job was processed.
    """
    context.install(res)
    summary = driver.reconcile(res)
    log.info("backfill runs at start-up: %s", summary)
    worker_queues = [queues.queue(res.redis, res.settings, kind) for kind in kinds]
    worker = SidecarWorker(worker_queues, connection=res.redis, res=res,
                           heartbeat_ttl=heartbeat_ttl, name=name or worker_name())
    scheduler = SchedulerThread([q.name for q in worker_queues], res.redis,
                                logging_level=res.settings.log_level.upper())
    scheduler.scheduler.register_birth()
    # Due retries go back to their queue before the first job is taken: a burst worker may
    # otherwise finish before the thread's first tick and leave them waiting.
    scheduler.tick()
    scheduler.start()
    try:
        return worker.work(burst=burst, logging_level=res.settings.log_level.upper())
    finally:
        scheduler.stop()
        context.uninstall()
