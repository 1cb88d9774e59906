-- A run that yields to a busy forum database says so: since when it has been waiting before its
-- next batch, and why (sidecar/core/backoff.py). Both NULL while it works.
ALTER TABLE sidecar_backfill_runs ADD COLUMN IF NOT EXISTS waiting_since timestamptz;
ALTER TABLE sidecar_backfill_runs ADD COLUMN IF NOT EXISTS waiting_reason text;
