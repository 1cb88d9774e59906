-- Discourse's search log (app/models/search_log.rb), for owned forums: what members searched for
-- and which result they opened. `sidecar tune` reads term, search_result_id and
-- search_result_type only. On a real forum the table already exists and is never altered.
CREATE TABLE IF NOT EXISTS search_logs (
  id                 serial    NOT NULL PRIMARY KEY,
  term               varchar   NOT NULL,
  user_id            integer,
  ip_address         inet      NOT NULL,
  search_result_id   integer,
  search_type        integer   NOT NULL,
  created_at         timestamp NOT NULL,
  search_result_type integer
);
CREATE INDEX IF NOT EXISTS index_search_logs_on_created_at ON search_logs (created_at);
