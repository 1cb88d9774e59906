"""How a run's batches are counted: once, in the transaction that stores their vectors.

``settle_batch`` runs inside ``Indexer.embed_posts``'s write transaction and counts a batch only
while it is still open, so a batch killed before its commit counts nothing and a batch run twice
counts once. The invariant ``done + skipped_unchanged + skipped_gone + failed + remaining ==
budgeted`` holds at every commit.
"""

from __future__ import annotations

from sidecar.db.embeddings import delete_embeddings
from sidecar.db.pool import DictConn
from sidecar.indexing import BatchResult


def settle_batch(conn: DictConn, run_id: int, seq: int, result: BatchResult) -> bool:
    """Count a batch's result once, in the caller's (vector-writing) transaction.

    Returns False (and counts nothing) when the batch was already settled: a re-run of a batch
    whose first run committed. Vectors of posts found no longer public are removed with it.
    """
    # Locks in one order everywhere (run, then batch), so a stop or a pump never deadlocks
    # with a batch being counted.
    conn.execute("SELECT 1 FROM sidecar_backfill_runs WHERE id = %s FOR UPDATE", (run_id,))
    row = conn.execute(
        "SELECT state FROM sidecar_backfill_batches WHERE run_id = %s AND seq = %s FOR UPDATE",
        (run_id, seq),
    ).fetchone()
    if row is None or row["state"] in ("done", "failed"):
        return False
    if result.gone_ids:
        delete_embeddings(conn, result.gone_ids)
    conn.execute(
        "UPDATE sidecar_backfill_batches SET state = 'done', embedded = %s, unchanged = %s,"
        " gone = %s, error = NULL, updated_at = now() WHERE run_id = %s AND seq = %s",
        (result.embedded, result.unchanged, result.missing, run_id, seq),
    )
    conn.execute(
        "UPDATE sidecar_backfill_runs SET done = done + %s, skipped_unchanged ="
        " skipped_unchanged + %s, skipped_gone = skipped_gone + %s, consecutive_errors = 0,"
        " updated_at = now() WHERE id = %s",
        (result.embedded, result.unchanged, result.missing, run_id),
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
    conn.execute(
        "UPDATE sidecar_backfill_runs SET status = 'paused', stop_reason = 'error',"
        " pause_reason = %s, updated_at = now() WHERE id = %s",
        (f"{row['consecutive_errors']} consecutive provider errors; last: {message}. Fix the "
         "model provider, then `sidecar backfill resume`", run_id),
    )
    return True
