-- The ask log: every answer the sidecar gave (POST /v1/answer) or checked for an assistant that
-- brings its own LLM (POST /v1/sanitize), beside its retrieval. Moderators read it (the review
-- pages, the content gaps); Prometheus counts the same outcomes. It holds what the member was
-- shown (sanitized: links only to posts that were public) and never any private text. Rows go
-- with their retrieval (`sidecar retrievals purge`: the retrievals' retention).
CREATE TABLE IF NOT EXISTS sidecar_answers (
  id              uuid             NOT NULL PRIMARY KEY,
  retrieval_id    uuid             NOT NULL REFERENCES sidecar_retrievals (id) ON DELETE CASCADE,
  created_at      timestamptz      NOT NULL DEFAULT now(),
  source          text             NOT NULL CHECK (source IN ('answer', 'sanitize')),
  outcome         text             NOT NULL CHECK (outcome IN ('answered', 'no_answer',
                                                             'abstained', 'failed', 'cancelled')),
  failure_stage   text,                                  -- with failed: generate, deadline...
  failure         text,                                  -- why, in a short form (no stack trace)
  llm             text,                                  -- the server's kind: ollama | openai
  model           text,
  streamed        boolean          NOT NULL DEFAULT false,
  answer          text             NOT NULL DEFAULT '',  -- the sanitized Markdown shown
  cited_post_ids  bigint[]         NOT NULL DEFAULT '{}',
  removed         jsonb            NOT NULL DEFAULT '{}', -- {"citations": n, "links": n, "html": n}
  first_token_ms  double precision,
  total_ms        double precision,
  prompt_tokens   integer,
  reply_tokens    integer
);
CREATE INDEX IF NOT EXISTS sidecar_answers_retrieval ON sidecar_answers (retrieval_id);
CREATE INDEX IF NOT EXISTS sidecar_answers_outcome_created
  ON sidecar_answers (outcome, created_at DESC);

-- A question the forum did not answer (its zone abstained, or the LLM said the evidence does not
-- answer) keeps its query's embedding, and the model's name, for the content-gap view to group.
ALTER TABLE sidecar_retrievals ADD COLUMN IF NOT EXISTS gap_vector real[];
ALTER TABLE sidecar_retrievals ADD COLUMN IF NOT EXISTS gap_model text;
