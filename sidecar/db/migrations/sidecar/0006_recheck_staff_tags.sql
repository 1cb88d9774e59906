-- Staff-only tags are no longer embedded (sidecar/db/public.py, PUBLIC_TAG: a tag only in tag
-- groups that the "everyone" group, id 0, may not see). Posts embedded before, under strategy 1
-- (whose text holds the topic's tags), may carry such a tag's name: their checks are set back so
-- that the next backfill's drift phase reads them again; the digest then differs and they are
-- re-embedded. Only the sidecar's own models' rows; nothing of the forum is altered.
INSERT INTO sidecar_embedding_checks (model_id, strategy_id, post_id, checked_at)
SELECT DISTINCT e.model_id, e.strategy_id, e.post_id, timestamp '1970-01-01'
FROM ai_posts_embeddings e
JOIN posts p ON p.id = e.post_id
JOIN topic_tags tt ON tt.topic_id = p.topic_id
JOIN tags g ON g.id = tt.tag_id
WHERE e.strategy_id = 1
  AND e.model_id IN (SELECT id FROM sidecar_embedding_models)
  AND EXISTS (SELECT 1 FROM tag_group_memberships m WHERE m.tag_id = g.id)
  AND NOT EXISTS (SELECT 1 FROM tag_group_memberships m JOIN tag_group_permissions gp
                  ON gp.tag_group_id = m.tag_group_id AND gp.group_id = 0 WHERE m.tag_id = g.id)
ON CONFLICT (model_id, strategy_id, post_id) DO UPDATE SET checked_at = EXCLUDED.checked_at;
