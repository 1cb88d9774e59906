-- The keyword index is a Tantivy index on each API node's disk (under SIDECAR_STATE_DIR). What
-- every node must apply to its copy is this log: one row per post whose keyword document may
-- have changed, appended by index events, imports and the catch-up of changes that came without
-- an event. Appends are serialized (sidecar/db/keyword_sql.py), so a node tails it by id.
CREATE TABLE IF NOT EXISTS sidecar_keyword_changes (
  id        bigserial   PRIMARY KEY,
  post_id   bigint,                  -- NULL: every node rebuilds its index
  logged_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS sidecar_keyword_changes_logged_at
  ON sidecar_keyword_changes (logged_at);

-- Names this database's keyword indexes on disk: several databases may share a state directory.
INSERT INTO sidecar_meta (key, value) VALUES ('keyword_index_id', gen_random_uuid()::text)
ON CONFLICT (key) DO NOTHING;
