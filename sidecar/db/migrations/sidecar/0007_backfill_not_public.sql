-- The backfill's planning removes the vectors of every post no longer public (deleted, hidden,
-- moved into a private message or a read-restricted category...), whatever the forum's events
-- said: how many each run removed.
ALTER TABLE sidecar_backfill_runs
  ADD COLUMN IF NOT EXISTS removed_not_public integer NOT NULL DEFAULT 0;
