-- Keep each vector inside its row. halfvec's default storage is EXTERNAL: a row over TOAST's
-- ~2 kB threshold (a 1,024-dim halfvec is 2,052 bytes: bge-m3's) has its vector moved to the
-- TOAST table, so every exact distance (the binary index's re-rank, an exact scan, a result's
-- score) costs a TOAST index probe and two chunk reads; an exact scan of 1,024-dim rows ran
-- 2.5x slower that way (docs/performance.md). MAIN keeps the vector inline while the row fits
-- a page (up to ~4,000 dims, the registry's limit) and moves it out only as a last resort.
-- Only the layout of rows written from now on changes (a re-embed or VACUUM FULL moves old
-- ones). A catalog change, no rewrite: the lock is brief. Only on the sidecar's own table:
-- discourse-ai's keeps the layout discourse-ai chose.
DO $$ BEGIN
  IF pg_has_role((SELECT relowner FROM pg_class WHERE oid = 'ai_posts_embeddings'::regclass),
                 'USAGE') AND has_schema_privilege('public', 'CREATE') THEN
    ALTER TABLE ai_posts_embeddings ALTER COLUMN embeddings SET STORAGE MAIN;
  END IF;
END $$;
