"""Indexing as RQ jobs: backfill runs with budgets, incremental events, the worker.

Job functions (``jobs.tasks``) take ids, never objects. They find the process's resources (one
``sidecar.runtime.resources.Resources``: the database pool, Redis, the preloaded embedder) in
``jobs.context``, where ``sidecar worker`` installs them once before it starts taking jobs: ONNX
sessions are loaded once and never cross a fork.
The truth about a backfill run lives in PostgreSQL (``sidecar.db.backfill_runs``); Redis only
carries the few batch jobs in flight (``jobs.driver``).
"""
