"""Migrations on a real PostgreSQL: idempotence, ownership of forum tables, pgvector checks."""

from __future__ import annotations

import psycopg
import pytest

from sidecar.db.migrate import check_current, forum_owned, upgrade
from sidecar.db.schema import with_search_path
from sidecar.errors import ConfigurationError


def _tables(url: str, schema: str = "public") -> set[str]:
    with psycopg.connect(url) as conn:
        return {r[0] for r in conn.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)).fetchall()}


def test_upgrade_creates_everything_once(db_url: str) -> None:
    first = upgrade(db_url)
    assert first["forum_owned"] is True
    assert "forum/0001_forum_tables" in first["applied"]
    # Discourse's tables and discourse-ai's in the forum's schema; the sidecar's in its own.
    forum, own = _tables(db_url), _tables(db_url, "sidecar")
    assert {"posts", "topics", "categories", "tags", "topic_tags", "post_search_data",
            "ai_posts_embeddings"} <= forum
    assert {"sidecar_embedding_models", "sidecar_meta", "sidecar_schema_migrations",
            "sidecar_retrievals"} <= own
    assert not {t for t in forum if t.startswith("sidecar_")}, forum
    assert not own & {"posts", "topics", "ai_posts_embeddings"}
    second = upgrade(db_url)
    assert second["applied"] == [] and second["moved"] == []
    assert str(second["pgvector"]) >= "0.7"


def test_an_older_install_s_tables_move_into_the_sidecar_schema(db_url: str) -> None:
    upgrade(db_url)
    with psycopg.connect(with_search_path(db_url)) as conn:
        conn.execute("INSERT INTO sidecar_meta VALUES ('kept', 'yes')")
        # As versions before the schema of its own left them: everything in public.
        conn.execute("""
            DO $$ DECLARE t record; BEGIN
              FOR t IN SELECT c.relname, c.relkind FROM pg_class c
                  JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE n.nspname = 'sidecar' AND c.relkind IN ('r', 'S')
                    AND NOT EXISTS (SELECT FROM pg_depend d WHERE d.objid = c.oid
                                    AND d.classid = 'pg_class'::regclass
                                    AND d.deptype IN ('a', 'i'))
              LOOP
                EXECUTE format('ALTER %s sidecar.%I SET SCHEMA public',
                               CASE t.relkind WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END,
                               t.relname);
              END LOOP;
            END $$;
            DROP SCHEMA sidecar""")
    assert "sidecar_retrievals" in _tables(db_url)
    with pytest.raises(ConfigurationError, match="run `sidecar db upgrade`"):
        check_current(db_url)
    info = upgrade(db_url)  # the one command, for the embedded database and a live forum alike
    assert info["applied"] == []  # the records moved too: nothing runs twice
    assert {"sidecar_meta", "sidecar_retrievals", "sidecar_embedding_models_id_seq"} \
        <= set(info["moved"])  # type: ignore[arg-type]
    assert not {t for t in _tables(db_url) if t.startswith("sidecar_")}
    check_current(db_url)
    with psycopg.connect(with_search_path(db_url)) as conn:
        assert conn.execute("SELECT value FROM sidecar.sidecar_meta WHERE key = 'kept'"
                            ).fetchone() == ("yes",)
        # The registry's ids still come from its own sequence, far above discourse-ai's.
        assert conn.execute("INSERT INTO sidecar_embedding_models (name, dimensions)"
                            " VALUES ('m', 3) RETURNING id").fetchone()[0] >= 100_001  # type: ignore[index]


def test_embeddings_table_matches_discourse_ai(db_url: str) -> None:
    upgrade(db_url)
    with psycopg.connect(db_url) as conn:
        cols = dict(conn.execute(
            "SELECT column_name, udt_name FROM information_schema.columns"
            " WHERE table_name = 'ai_posts_embeddings'").fetchall())
        unique = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname ="
            " 'index_ai_posts_embeddings_on_model_strategy_post'").fetchone()
    assert cols == {"post_id": "int8", "model_id": "int8", "model_version": "int4",
                    "strategy_id": "int4", "strategy_version": "int4", "digest": "text",
                    "embeddings": "halfvec", "created_at": "timestamp",
                    "updated_at": "timestamp"}
    assert unique is not None and "(model_id, strategy_id, post_id)" in unique[0]


def test_a_real_forum_is_read_never_altered(db_url: str) -> None:
    # A forum database that already has its own tables (as Discourse's would).
    with psycopg.connect(db_url) as conn:
        conn.execute("""
            CREATE TABLE categories (id int PRIMARY KEY, name varchar, slug varchar,
                read_restricted bool, parent_category_id int);
            CREATE TABLE topics (id int PRIMARY KEY, title varchar, slug varchar,
                category_id int, archetype varchar, visible bool, deleted_at timestamp,
                bumped_at timestamp);
            CREATE TABLE posts (id int PRIMARY KEY, topic_id int, post_number int, raw text,
                cooked text, deleted_at timestamp, hidden bool, hidden_at timestamp,
                post_type int,
                updated_at timestamp, reply_to_post_number int, user_deleted bool);
            CREATE TABLE tags (id int PRIMARY KEY, name varchar);
            CREATE TABLE topic_tags (topic_id int, tag_id int);
            CREATE TABLE tag_group_memberships (tag_id int, tag_group_id int);
            CREATE TABLE tag_group_permissions (tag_group_id bigint, group_id bigint);
            CREATE TABLE post_search_data (post_id int PRIMARY KEY, search_data tsvector);
            CREATE TABLE shared_drafts (id bigint PRIMARY KEY, topic_id int);
        """)
    info = upgrade(db_url)
    assert info["forum_owned"] is False
    assert not any(a.startswith("forum/") for a in info["applied"])  # type: ignore[union-attr]
    with psycopg.connect(db_url) as conn:
        assert not forum_owned(conn)
        cols = {r[0] for r in conn.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'posts'")}
    assert "external_id" not in cols  # our forum migration never touched it


def test_a_forum_missing_columns_is_refused_clearly(db_url: str) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute("CREATE TABLE posts (id int PRIMARY KEY, raw text)")
    with pytest.raises(ConfigurationError, match=r"posts\.cooked"):
        upgrade(db_url)


def test_a_server_without_pgvector_fails_with_a_clear_message() -> None:
    # The machines of this project run a PostgreSQL 15 without pgvector on 5432.
    url = "postgresql://postgres@127.0.0.1:5432/postgres"
    try:
        with psycopg.connect(url, connect_timeout=2) as conn:
            has_vector = conn.execute(
                "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'").fetchone()
    except psycopg.OperationalError:
        pytest.skip("no PostgreSQL on 127.0.0.1:5432")
    if has_vector:
        pytest.skip("that server has pgvector")
    with pytest.raises(ConfigurationError, match=r"pgvector >= 0.7"):
        upgrade(url)


def test_a_bge_m3_sized_vector_stays_in_its_row(db_url: str) -> None:
    """1,024 halfvec dims are over TOAST's threshold: they must stay inline all the same, or
    every exact distance (re-rank, exact scan) reads the TOAST table; 4,000 still fit."""
    import numpy as np  # only this test writes vectors
    from pgvector.psycopg import register_vector

    from sidecar.db.embeddings import EmbeddingRow, register_model, upsert_embeddings

    upgrade(db_url)
    rng = np.random.default_rng(0)
    with psycopg.connect(with_search_path(db_url), row_factory=psycopg.rows.dict_row) as conn:
        register_vector(conn)
        for dims in (1024, 4000):
            model = register_model(conn, name=f"m{dims}", dimensions=dims, version=1)
            upsert_embeddings(conn, model, 1, 1, [
                EmbeddingRow(i, "d", rng.standard_normal(dims).astype(np.float32))
                for i in range(1, 21)])
        conn.commit()
        toast = conn.execute(
            "SELECT pg_relation_size(reltoastrelid) AS bytes FROM pg_class"
            " WHERE oid = 'ai_posts_embeddings'::regclass").fetchone()
        stored = conn.execute(
            "SELECT count(*) AS n, min(vector_dims(embeddings)) AS lo,"
            " max(vector_dims(embeddings)) AS hi FROM ai_posts_embeddings").fetchone()
    assert stored == {"n": 40, "lo": 1024, "hi": 4000}
    assert toast is not None and toast["bytes"] == 0



def test_every_migration_has_a_number_of_its_own() -> None:
    from sidecar.db.migrate import load_migrations

    for track in ("sidecar", "forum"):
        versions = [m.version for m in load_migrations(track)]
        assert len(versions) == len(set(versions)), track
