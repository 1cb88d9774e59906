"""``sidecar_backfill_batches``: a run's planned batches, their jobs, and how they are counted.

A batch is counted once, in the transaction that stores its vectors: :func:`settle_batch` runs
inside ``Indexer.embed_posts``'s write transaction and counts a batch only while it is still
open, so a batch killed before its commit counts nothing and a batch run twice counts once. The
invariant ``done + skipped_unchanged + skipped_gone + failed + remaining == budgeted`` holds at
every commit. Locks are taken run row first, then batch rows (as in
:mod:`sidecar.db.backfill_runs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from sidecar.db.backfill_runs import StopReason, pause_run
from sidecar.db.embeddings import delete_embeddings
from sidecar.db.pool import DictConn
from sidecar.db.rows import fetch_all, fetch_one


class BatchState(StrEnum):
    """Where a batch is (the stored ``state``)."""

    PENDING = "pending"  # planned, no job holds it
    QUEUED = "queued"  # a job in Redis holds it
    DONE = "done"  # settled: its vectors and counts are committed
    FAILED = "failed"  # settled: its retries are spent

    @property
    def settled(self) -> bool:
        """Done or failed: counted, never run again."""
        return self in (BatchState.DONE, BatchState.FAILED)


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch's state and its posts."""

    state: BatchState
    post_ids: list[int]

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", BatchState(self.state))


@dataclass(frozen=True, slots=True)
class HeldBatch:
    """A queued batch and the job that holds it."""

    seq: int
    job_id: str | None


def get_batch(conn: DictConn, run_id: int, seq: int) -> Batch | None:
    """Batch ``seq`` of a run."""
    return fetch_one(conn, Batch,
                     "SELECT state, post_ids FROM sidecar_backfill_batches"
                     " WHERE run_id = %s AND seq = %s", (run_id, seq))


def pending_seqs(conn: DictConn, run_id: int, limit: int) -> list[int]:
    """The first ``limit`` pending batches of a run, in plan order."""
    rows = conn.execute(
        "SELECT seq FROM sidecar_backfill_batches WHERE run_id = %s AND state = 'pending'"
        " ORDER BY seq LIMIT %s", (run_id, limit),
    ).fetchall()
    return [int(r["seq"]) for r in rows]


def first_pending(conn: DictConn, run_id: int) -> int | None:
    """The first pending batch of a run, in plan order."""
    seqs = pending_seqs(conn, run_id, 1)
    return seqs[0] if seqs else None


def count_queued(conn: DictConn, run_id: int) -> int:
    """Batches of a run held by a job."""
    row = conn.execute(
        "SELECT count(*) AS n FROM sidecar_backfill_batches WHERE run_id = %s"
        " AND state = 'queued'", (run_id,),
    ).fetchone()
    return int(row["n"]) if row else 0


def queued_batches(conn: DictConn, run_id: int) -> list[HeldBatch]:
    """The queued batches of a run with their jobs (to find those whose job was lost)."""
    return fetch_all(conn, HeldBatch,
                     "SELECT seq, job_id FROM sidecar_backfill_batches WHERE run_id = %s"
                     " AND state = 'queued'", (run_id,))


def mark_queued(conn: DictConn, run_id: int, seq: int, job_id: str) -> None:
    """A job now holds the batch."""
    conn.execute(
        "UPDATE sidecar_backfill_batches SET state = 'queued', job_id = %s,"
        " updated_at = now() WHERE run_id = %s AND seq = %s",
        (job_id, run_id, seq),
    )


def settle_batch(conn: DictConn, run_id: int, seq: int, *, embedded: int, unchanged: int,
                 gone: int, gone_ids: Sequence[int]) -> bool:
    """Count a batch's result once, in the caller's (vector-writing) transaction.

    Returns False (and counts nothing) when the batch was already settled: a re-run of a batch
    whose first run committed. Vectors of posts found no longer public (``gone_ids``) are
    removed with it.
    """
    # Locks in one order everywhere (run, then batch), so a stop or a pump never deadlocks
    # with a batch being counted.
    conn.execute("SELECT 1 FROM sidecar_backfill_runs WHERE id = %s FOR UPDATE", (run_id,))
    row = conn.execute(
        "SELECT state FROM sidecar_backfill_batches WHERE run_id = %s AND seq = %s FOR UPDATE",
        (run_id, seq),
    ).fetchone()
    if row is None or BatchState(row["state"]).settled:
        return False
    if gone_ids:
        delete_embeddings(conn, gone_ids)
    conn.execute(
        "UPDATE sidecar_backfill_batches SET state = 'done', embedded = %s, unchanged = %s,"
        " gone = %s, error = NULL, updated_at = now() WHERE run_id = %s AND seq = %s",
        (embedded, unchanged, gone, run_id, seq),
    )
    conn.execute(
        "UPDATE sidecar_backfill_runs SET done = done + %s, skipped_unchanged ="
        " skipped_unchanged + %s, skipped_gone = skipped_gone + %s, consecutive_errors = 0,"
        " updated_at = now() WHERE id = %s",
        (embedded, unchanged, gone, run_id),
    )
    return True


def fail_batch(conn: DictConn, run_id: int, seq: int, error: str) -> bool:
    """Count an open batch as failed (its retries are spent). False if already settled."""
    row = conn.execute(
        "UPDATE sidecar_backfill_batches SET state = 'failed', error = %s, updated_at = now()"
        " WHERE run_id = %s AND seq = %s AND state IN ('pending', 'queued')"
        " RETURNING cardinality(post_ids) AS n",
        (error, run_id, seq),
    ).fetchone()
    if row is None:
        return False
    conn.execute(
        "UPDATE sidecar_backfill_runs SET failed = failed + %s, updated_at = now()"
        " WHERE id = %s",
        (row["n"], run_id),
    )
    return True


def release_batch(conn: DictConn, run_id: int, seq: int, job_id: str | None = None) -> None:
    """Put a queued batch back to pending (its job will not run it), unless settled.

    With ``job_id`` only that job's hold is released: a newer job may hold the batch already.
    """
    conn.execute(
        "UPDATE sidecar_backfill_batches SET state = 'pending', job_id = NULL, updated_at = now()"
        " WHERE run_id = %s AND seq = %s AND state = 'queued'"
        " AND (%s::text IS NULL OR job_id = %s::text)",
        (run_id, seq, job_id, job_id),
    )


def record_error(conn: DictConn, run_id: int, message: str, *, counts: bool,
                 pause_after: int) -> bool:
    """Note a batch error; ``counts`` ones pause the run after ``pause_after`` in a row.

    Returns True when this error paused the run.
    """
    row = conn.execute(
        "UPDATE sidecar_backfill_runs SET last_error = %s, updated_at = now(),"
        " consecutive_errors = consecutive_errors + %s WHERE id = %s"
        " RETURNING status, consecutive_errors",
        (message, 1 if counts else 0, run_id),
    ).fetchone()
    if row is None or row["status"] != "running" or not counts:
        return False
    if row["consecutive_errors"] < max(1, pause_after):
        return False
    pause_run(conn, run_id, StopReason.ERROR,
              f"{row['consecutive_errors']} consecutive provider errors; last: {message}. Fix "
              "the model provider, then `sidecar backfill resume`")
    return True
