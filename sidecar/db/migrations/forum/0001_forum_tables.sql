-- Forum tables shaped like Discourse's (see ../shared/reference/discourse.md, section 1).
-- Only ever applied to a database the sidecar owns (embedded, demo or imported forum): on a real
-- Discourse database these tables already exist and the sidecar never alters them.
-- Column names and types follow Discourse (Rails :datetime = timestamp without time zone, UTC).

CREATE TABLE IF NOT EXISTS users (
  id              integer     NOT NULL PRIMARY KEY,
  username        varchar(60) NOT NULL,
  username_lower  varchar(60) NOT NULL,
  name            varchar,
  active          boolean     NOT NULL DEFAULT true,
  admin           boolean     NOT NULL DEFAULT false,
  moderator       boolean     NOT NULL DEFAULT false,
  trust_level     integer     NOT NULL DEFAULT 1,
  created_at      timestamp   NOT NULL,
  updated_at      timestamp   NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS index_users_on_username_lower ON users (username_lower);

CREATE TABLE IF NOT EXISTS categories (
  id                 integer     NOT NULL PRIMARY KEY,
  name               varchar(50) NOT NULL,
  name_lower         varchar(50) NOT NULL,
  slug               varchar     NOT NULL,
  description        text,
  parent_category_id integer,
  read_restricted    boolean     NOT NULL DEFAULT false,
  position           integer,
  topic_count        integer     NOT NULL DEFAULT 0,
  post_count         integer     NOT NULL DEFAULT 0,
  search_priority    integer     DEFAULT 0,
  created_at         timestamp   NOT NULL,
  updated_at         timestamp   NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS unique_index_categories_on_name
  ON categories (COALESCE(parent_category_id, -1), name);

CREATE TABLE IF NOT EXISTS topics (
  id                   integer   NOT NULL PRIMARY KEY,
  title                varchar   NOT NULL,
  fancy_title          varchar,
  slug                 varchar,
  category_id          integer,
  archetype            varchar   NOT NULL DEFAULT 'regular',
  subtype              varchar,
  visible              boolean   NOT NULL DEFAULT true,
  closed               boolean   NOT NULL DEFAULT false,
  archived             boolean   NOT NULL DEFAULT false,
  deleted_at           timestamp,
  posts_count          integer   NOT NULL DEFAULT 0,
  reply_count          integer   NOT NULL DEFAULT 0,
  highest_post_number  integer   NOT NULL DEFAULT 0,
  like_count           integer   NOT NULL DEFAULT 0,
  views                integer   NOT NULL DEFAULT 0,
  bumped_at            timestamp NOT NULL,
  last_posted_at       timestamp,
  created_at           timestamp NOT NULL,
  updated_at           timestamp NOT NULL,
  user_id              integer,
  excerpt              varchar,
  word_count           integer,
  visibility_reason_id integer,
  locale               varchar(20),
  external_id          varchar,
  CONSTRAINT has_category_id CHECK (category_id IS NOT NULL OR archetype <> 'regular'),
  CONSTRAINT pm_has_no_category CHECK (category_id IS NULL OR archetype <> 'private_message')
);
CREATE INDEX IF NOT EXISTS idxtopicslug ON topics (slug) WHERE deleted_at IS NULL AND slug IS NOT NULL;
CREATE INDEX IF NOT EXISTS index_topics_on_bumped_at_public ON topics (bumped_at)
  WHERE deleted_at IS NULL AND archetype <> 'private_message';

CREATE TABLE IF NOT EXISTS posts (
  id                    integer   NOT NULL PRIMARY KEY,
  user_id               integer,
  topic_id              integer   NOT NULL,
  post_number           integer   NOT NULL,
  raw                   text      NOT NULL,
  cooked                text      NOT NULL,
  created_at            timestamp NOT NULL,
  updated_at            timestamp NOT NULL,
  reply_to_post_number  integer,
  reply_count           integer   NOT NULL DEFAULT 0,
  quote_count           integer   NOT NULL DEFAULT 0,
  deleted_at            timestamp,
  like_count            integer   NOT NULL DEFAULT 0,
  score                 double precision,
  reads                 integer   NOT NULL DEFAULT 0,
  post_type             integer   NOT NULL DEFAULT 1,
  sort_order            integer,
  hidden                boolean   NOT NULL DEFAULT false,
  hidden_reason_id      integer,
  hidden_at             timestamp,
  last_version_at       timestamp NOT NULL,
  user_deleted          boolean   NOT NULL DEFAULT false,
  reply_to_user_id      integer,
  percent_rank          double precision DEFAULT 1.0,
  word_count            integer,
  version               integer   NOT NULL DEFAULT 1,
  public_version        integer   NOT NULL DEFAULT 1,
  wiki                  boolean   NOT NULL DEFAULT false,
  baked_at              timestamp,
  baked_version         integer,
  edit_reason           varchar,
  action_code           varchar,
  image_upload_id       bigint,
  locale                varchar(20),
  external_id           varchar
);
CREATE UNIQUE INDEX IF NOT EXISTS index_posts_on_topic_id_and_post_number ON posts (topic_id, post_number);
CREATE INDEX IF NOT EXISTS idx_posts_created_at_topic_id ON posts (created_at, topic_id)
  WHERE deleted_at IS NULL;
CREATE INDEX IF NOT EXISTS index_posts_on_id_topic_id_where_not_deleted_or_empty ON posts (id, topic_id)
  WHERE deleted_at IS NULL AND raw <> '';
CREATE INDEX IF NOT EXISTS index_posts_on_topic_id_and_reply_to_post_number
  ON posts (topic_id, reply_to_post_number);

CREATE TABLE IF NOT EXISTS tags (
  id                 integer     NOT NULL PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY,
  name               varchar     NOT NULL,
  topic_count        integer     NOT NULL DEFAULT 0,
  pm_topic_count     integer     NOT NULL DEFAULT 0,
  public_topic_count integer     NOT NULL DEFAULT 0,
  description        varchar,
  created_at         timestamp   NOT NULL,
  updated_at         timestamp   NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS index_tags_on_lower_name ON tags (lower(name));

CREATE TABLE IF NOT EXISTS topic_tags (
  id         integer   NOT NULL PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY,
  topic_id   integer   NOT NULL,
  tag_id     integer   NOT NULL,
  created_at timestamp NOT NULL,
  updated_at timestamp NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS index_topic_tags_on_topic_id_and_tag_id ON topic_tags (topic_id, tag_id);

CREATE TABLE IF NOT EXISTS post_search_data (
  post_id     integer NOT NULL PRIMARY KEY,
  search_data tsvector,
  raw_data    text,
  locale      varchar(255),
  version     integer DEFAULT 0
);
CREATE INDEX IF NOT EXISTS idx_search_post ON post_search_data USING gin (search_data);
