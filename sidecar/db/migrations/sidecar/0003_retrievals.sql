-- Every /v1/retrieve answer is recorded: /v1/sanitize resolves [[n]] against its evidence, and
-- moderators review the abstain and cautious ones (and label them, to calibrate the zones).

CREATE TABLE IF NOT EXISTS sidecar_retrievals (
  id            uuid             NOT NULL PRIMARY KEY,
  created_at    timestamptz      NOT NULL DEFAULT now(),
  conversation  jsonb            NOT NULL,             -- the messages as received
  query         text             NOT NULL,             -- standalone query used ('' if gated)
  query_source  text             NOT NULL,             -- single_turn | llm | cache | fallback | gate
  locale        text,
  zone          text             NOT NULL CHECK (zone IN ('normal', 'cautious', 'abstain')),
  gate_reason   text,                                  -- set when the input gate decided
  scorer        text             NOT NULL,             -- e.g. cross-encoder:<name>, bi-encoder:<name>
  top_score     double precision,
  scores        jsonb            NOT NULL DEFAULT '[]', -- relevance of each evidence item, in order
  evidence      jsonb            NOT NULL DEFAULT '[]', -- [{n, topic_id, post_id, post_number, title, url, score}]
  candidates    jsonb            NOT NULL DEFAULT '[]', -- the wider list considered [{topic_id, post_id, score}]
  trace         jsonb            NOT NULL DEFAULT '[]'
);
CREATE INDEX IF NOT EXISTS sidecar_retrievals_zone_created
  ON sidecar_retrievals (zone, created_at DESC);
CREATE INDEX IF NOT EXISTS sidecar_retrievals_created ON sidecar_retrievals (created_at);

CREATE TABLE IF NOT EXISTS sidecar_retrieval_labels (
  retrieval_id   uuid        NOT NULL PRIMARY KEY
                             REFERENCES sidecar_retrievals (id) ON DELETE CASCADE,
  label          text        NOT NULL CHECK (label IN ('correct_abstention', 'should_have_answered',
                                                       'wrong_evidence')),
  right_topic_id integer,                              -- with should_have_answered: the topic
  note           text,
  moderator      text,
  labelled_at    timestamptz NOT NULL DEFAULT now()
);
