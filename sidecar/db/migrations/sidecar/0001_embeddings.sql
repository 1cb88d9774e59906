-- Embeddings, compatible with discourse-ai's ai_posts_embeddings (created only if absent: on a
-- forum that runs discourse-ai the table already exists and we write rows under our own model ids).
-- It lives in the forum's schema, public, where discourse-ai keeps it, while the sidecar's own
-- tables live in the schema sidecar (sidecar/db/schema.py). Creating it, and its indexes, needs
-- CREATE on public, which the sidecar's role never has beside a live forum: there the SQL of
-- `sidecar db grants` creates it, and the owner adds what is missing (`sidecar db upgrade
-- --as-owner`, or `sidecar db owner-sql`; sidecar/db/owner.py). Only a database the sidecar owns
-- (the embedded one, the evaluation's) has it made here.

DO $$ BEGIN
  IF to_regclass('public.ai_posts_embeddings') IS NULL THEN
    CREATE TABLE public.ai_posts_embeddings (
      post_id          bigint       NOT NULL,
      model_id         bigint       NOT NULL,
      model_version    integer      NOT NULL,
      strategy_id      integer      NOT NULL,
      strategy_version integer      NOT NULL,
      digest           text         NOT NULL,
      embeddings       halfvec      NOT NULL,  -- no typmod, as in discourse-ai: cast to halfvec(D)
      created_at       timestamp(6) NOT NULL,
      updated_at       timestamp(6) NOT NULL
    );
  END IF;
END $$;
DO $$ BEGIN
  IF pg_has_role((SELECT relowner FROM pg_class WHERE oid = 'ai_posts_embeddings'::regclass),
                 'USAGE') AND has_schema_privilege('public', 'CREATE') THEN
    CREATE UNIQUE INDEX IF NOT EXISTS index_ai_posts_embeddings_on_model_strategy_post
      ON ai_posts_embeddings (model_id, strategy_id, post_id);
    -- The backfill joins on (post_id, model_id); discourse-ai learnt this in PR #1513.
    CREATE INDEX IF NOT EXISTS sidecar_ai_posts_embeddings_post_model
      ON ai_posts_embeddings (post_id, model_id);
  END IF;
END $$;

-- Our registry of embedding models. Ids start far above discourse-ai's embedding_definitions ids
-- so that both can share ai_posts_embeddings without colliding.
CREATE SEQUENCE IF NOT EXISTS sidecar_embedding_models_id_seq START WITH 100001;
CREATE TABLE IF NOT EXISTS sidecar_embedding_models (
  id          bigint      NOT NULL PRIMARY KEY DEFAULT nextval('sidecar_embedding_models_id_seq'),
  name        text        NOT NULL UNIQUE,
  dimensions  integer     NOT NULL CHECK (dimensions > 0 AND dimensions <= 4000),
  version     integer     NOT NULL DEFAULT 1,
  max_length  integer,
  pooling     text,
  checksum    text,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);

-- When a post's text was last compared with its stored digest. A post checked and found
-- unchanged is not selected again until the post, its topic or its category changes.
CREATE TABLE IF NOT EXISTS sidecar_embedding_checks (
  model_id    bigint       NOT NULL,
  strategy_id integer      NOT NULL,
  post_id     bigint       NOT NULL,
  checked_at  timestamp(6) NOT NULL,
  PRIMARY KEY (model_id, strategy_id, post_id)
);
