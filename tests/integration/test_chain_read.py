"""The rerank chain's reads on a real PostgreSQL: optional dump fields, schema detection,
accepted answers in every discourse-solved layout (the 2026 answers table, the 2025 column, the
older custom fields), the public filter, vectors."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

from sidecar.db.chain_read import FeatureReader, detect_schema, post_vectors
from sidecar.db.evidence_read import post_similarities
from sidecar.db.migrate import upgrade
from sidecar.ingest.importer import import_dump
from tests.conftest import demo_forum, owner_url
from tests.helpers import category, post, topic, write_dump

# Demo topic 23 (Proxmox Backup Server file restore): accepted answer 147, a reply; topic 15 is
# in the café (search priority low), topic 19 in the read-restricted staff category.
SOLVED, ANSWER, OTHER_REPLY = 23, 147, 149
ANSWERS_SQL = ("SELECT s.topic_id, a.answer_post_id FROM discourse_solved_topic_answers a"
               " JOIN discourse_solved_solved_topics s ON s.id = a.solved_topic_id ORDER BY 1")
# The 2025 layout: one answer per topic, in a column of the topic table.
COLUMN_SHAPE = ("ALTER TABLE discourse_solved_solved_topics ADD COLUMN answer_post_id integer,"
                " ADD COLUMN accepter_user_id integer")


@pytest.fixture(scope="module")
def chain_forum(tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str, redis_url: str,
                minilm: Any) -> Iterator[Any]:
    """The demo forum, embedded, in a database of its own (tests change it in transactions)."""
    with demo_forum(pg_admin_url, redis_url, tmp_path_factory.mktemp("chain"), minilm,
                    prefix="t_chain") as res:
        yield res


@pytest.fixture
def conn(chain_forum: Any) -> Iterator[psycopg.Connection[dict[str, Any]]]:
    """A connection whose changes are rolled back after the test."""
    with psycopg.connect(owner_url(chain_forum.urls.database_url), row_factory=dict_row) as c:
        register_vector(c)
        yield c
        c.rollback()


def test_demo_forum_carries_likes_accepted_answers_and_a_priority(
    conn: psycopg.Connection[dict[str, Any]]
) -> None:
    solved = conn.execute("SELECT count(*) AS n FROM discourse_solved_solved_topics").fetchone()
    assert solved is not None and solved["n"] == 15
    answers = conn.execute("SELECT count(*) AS n FROM discourse_solved_topic_answers").fetchone()
    assert answers is not None and answers["n"] == 15
    # discourse-solved's current shape: the answer columns of the topic table are gone.
    assert detect_schema(conn).solved_storage == "answers"
    assert not conn.execute("SELECT 1 FROM information_schema.columns WHERE table_name ="
                            " 'discourse_solved_solved_topics' AND column_name = 'answer_post_id'"
                            ).fetchone()
    row = conn.execute(
        "SELECT t.like_count, (SELECT sum(like_count) FROM posts WHERE topic_id = t.id"
        " AND deleted_at IS NULL) AS total FROM topics t WHERE t.id = %s", (SOLVED,)).fetchone()
    assert row is not None and row["like_count"] == row["total"] > 0
    cafe = conn.execute("SELECT search_priority FROM categories WHERE slug = 'cafe'").fetchone()
    assert cafe is not None and cafe["search_priority"] == 3


def test_features_of_the_demo(conn: psycopg.Connection[dict[str, Any]]) -> None:
    reader = FeatureReader()
    feats = reader.features(conn, [(SOLVED, ANSWER), (15, 102), (2, 5)])
    assert feats[SOLVED].accepted_answer_post_id == ANSWER
    likes = conn.execute("SELECT like_count FROM posts WHERE id = %s", (ANSWER,)).fetchone()
    assert likes is not None and feats[SOLVED].post_like_count == likes["like_count"] > 0
    assert feats[SOLVED].topic_like_count > feats[SOLVED].post_like_count
    assert feats[SOLVED].post_created_at is not None and feats[SOLVED].last_posted_at is not None
    assert feats[15].search_priority == 3 and feats[15].closed
    assert feats[2].accepted_answer_post_id == 6 and feats[2].search_priority == 0
    assert reader.schema(conn).sources() == {"accepted_answer": True, "post_likes": True,
                                             "topic_likes": True, "search_priority": True}


def test_features_never_read_non_public_posts(conn: psycopg.Connection[dict[str, Any]]) -> None:
    reader = FeatureReader()
    staff = conn.execute("SELECT id FROM posts WHERE topic_id = 19 ORDER BY id LIMIT 1"
                         ).fetchone()
    assert staff is not None
    assert reader.features(conn, [(19, staff["id"])]) == {}  # read-restricted category
    conn.execute("UPDATE posts SET hidden = true WHERE id = %s", (ANSWER,))
    # The answer is hidden now: the topic keeps its other posts, not its accepted answer.
    feats = reader.features(conn, [(SOLVED, OTHER_REPLY)])
    assert feats[SOLVED].accepted_answer_post_id is None
    assert reader.features(conn, [(SOLVED, ANSWER)]) == {}  # its best post is hidden
    # A pair whose post is not in that topic reads nothing.
    assert reader.features(conn, [(2, OTHER_REPLY)]) == {}


def test_accepted_answers_from_the_older_custom_fields(
    conn: psycopg.Connection[dict[str, Any]]
) -> None:
    conn.execute("DROP TABLE discourse_solved_solved_topics CASCADE")
    conn.execute(
        "CREATE TABLE topic_custom_fields (id serial PRIMARY KEY, topic_id integer NOT NULL,"
        " name varchar(256) NOT NULL, value text, created_at timestamp NOT NULL DEFAULT now(),"
        " updated_at timestamp NOT NULL DEFAULT now())")
    conn.execute(
        "INSERT INTO topic_custom_fields (topic_id, name, value) VALUES"
        " (%s, 'accepted_answer_post_id', %s), (2, 'accepted_answer_post_id', 'not a number'),"
        " (6, 'something_else', '56'), (9, 'accepted_answer_post_id', '5')",
        (SOLVED, str(OTHER_REPLY)))
    reader = FeatureReader()
    schema = reader.schema(conn)
    assert schema.solved_custom_fields and not schema.solved_table
    feats = reader.features(conn, [(SOLVED, ANSWER), (2, 5), (6, 53), (9, 70)])
    assert feats[SOLVED].accepted_answer_post_id == OTHER_REPLY
    assert feats[2].accepted_answer_post_id is None  # not an integer
    assert feats[6].accepted_answer_post_id is None  # another field
    assert feats[9].accepted_answer_post_id is None  # post 5 belongs to another topic


def test_the_plugin_table_wins_over_custom_fields(
    conn: psycopg.Connection[dict[str, Any]]
) -> None:
    conn.execute("CREATE TABLE topic_custom_fields (id serial, topic_id int, name text,"
                 " value text)")
    conn.execute("INSERT INTO topic_custom_fields (topic_id, name, value)"
                 " VALUES (%s, 'accepted_answer_post_id', %s)", (SOLVED, str(OTHER_REPLY)))
    feats = FeatureReader().features(conn, [(SOLVED, ANSWER)])
    assert feats[SOLVED].accepted_answer_post_id == ANSWER


def test_the_2025_column_is_read_where_there_is_no_answers_table(
    conn: psycopg.Connection[dict[str, Any]]
) -> None:
    conn.execute("DROP TABLE discourse_solved_topic_answers")
    conn.execute(COLUMN_SHAPE)
    conn.execute("UPDATE discourse_solved_solved_topics SET answer_post_id = %s"
                 " WHERE topic_id = %s", (OTHER_REPLY, SOLVED))
    reader = FeatureReader()
    assert reader.schema(conn).solved_storage == "column"
    feats = reader.features(conn, [(SOLVED, ANSWER), (2, 5)])
    assert feats[SOLVED].accepted_answer_post_id == OTHER_REPLY
    assert feats[SOLVED].accepted_answer_post_ids == (OTHER_REPLY,)
    assert feats[2].accepted_answer_post_id is None  # its row has no answer in the column


def test_the_answers_table_wins_over_the_old_column_left_stale(
    conn: psycopg.Connection[dict[str, Any]]
) -> None:
    # The post-deploy migration that keeps the columns stops filling them: stale copies.
    conn.execute(COLUMN_SHAPE)
    conn.execute("UPDATE discourse_solved_solved_topics SET answer_post_id = %s", (OTHER_REPLY,))
    # Topic 2's answer was unaccepted since: gone from the answers table, not from the column.
    conn.execute("DELETE FROM discourse_solved_topic_answers a USING"
                 " discourse_solved_solved_topics s WHERE a.solved_topic_id = s.id"
                 " AND s.topic_id = 2")
    feats = FeatureReader().features(conn, [(SOLVED, ANSWER), (2, 5)])
    assert feats[SOLVED].accepted_answer_post_id == ANSWER
    assert feats[2].accepted_answer_post_id is None and not feats[2].accepted_answer_post_ids


def test_an_import_into_an_older_layout_keeps_its_column_filled(db_url: str,
                                                               tmp_path: Path) -> None:
    upgrade(db_url)
    with psycopg.connect(db_url) as c:  # what an older sidecar made: the 2025 table
        c.execute("CREATE TABLE discourse_solved_solved_topics (id bigint PRIMARY KEY GENERATED"
                  " BY DEFAULT AS IDENTITY, topic_id integer NOT NULL, answer_post_id integer"
                  " NOT NULL, accepter_user_id integer NOT NULL, topic_timer_id integer,"
                  " created_at timestamp NOT NULL, updated_at timestamp NOT NULL)")
        c.execute("CREATE UNIQUE INDEX ON discourse_solved_solved_topics (topic_id)")
    topics = [topic(10, "Sealant", 1, accepted_answer_post_id=101, posts_count=2)]
    posts = [post(100, 10, 1, "How much sealant?"), post(101, 10, 2, "60 ml.")]
    for n, answer in enumerate((101, 100)):
        topics[0]["accepted_answer_post_id"] = answer
        dump = write_dump(tmp_path / str(n), [category(1, "Repairs")], topics, posts)
        with psycopg.connect(db_url) as c:
            import_dump(c, dump, "english")
            assert c.execute(ANSWERS_SQL).fetchall() == [(10, answer)]
            assert c.execute("SELECT topic_id, answer_post_id FROM"
                             " discourse_solved_solved_topics").fetchall() == [(10, answer)]


def test_a_forum_without_the_optional_columns_reads_neutral_features(
    conn: psycopg.Connection[dict[str, Any]]
) -> None:
    conn.execute("DROP TABLE discourse_solved_solved_topics CASCADE")
    for table, column in (("posts", "like_count"), ("topics", "like_count"),
                          ("categories", "search_priority"), ("topics", "closed"),
                          ("topics", "archived"), ("topics", "last_posted_at")):
        conn.execute(f"ALTER TABLE {table} DROP COLUMN {column}")  # type: ignore[arg-type]
    reader = FeatureReader()
    assert not any(reader.schema(conn).sources().values())
    feats = reader.features(conn, [(SOLVED, ANSWER), (15, 102)])
    assert feats[SOLVED].accepted_answer_post_id is None
    assert feats[SOLVED].post_like_count == feats[SOLVED].topic_like_count == 0
    assert feats[15].search_priority == 0 and not feats[15].closed
    assert feats[SOLVED].last_posted_at is None and feats[SOLVED].created_at is not None


def test_the_schema_is_detected_once_then_after_its_ttl(
    conn: psycopg.Connection[dict[str, Any]]
) -> None:
    reader = FeatureReader(ttl_s=3600)
    assert reader.schema(conn).solved_table
    conn.execute("DROP TABLE discourse_solved_solved_topics CASCADE")
    assert reader.schema(conn).solved_table  # cached
    assert not detect_schema(conn).solved_table
    assert not FeatureReader(ttl_s=0.0).schema(conn).solved_table


def test_post_vectors_are_the_stored_ones_of_public_posts(
    chain_forum: Any, conn: psycopg.Connection[dict[str, Any]]
) -> None:
    model = chain_forum.model
    ids = [5, 6, ANSWER, OTHER_REPLY]
    vectors = post_vectors(conn, model_id=model.id, strategy_id=1,
                           dimensions=model.dimensions, post_ids=ids)
    assert set(vectors) == set(ids)
    query = chain_forum.embedder.embed(["restore one file from a backup"], kind="query")[0]
    sims = post_similarities(conn, model_id=model.id, strategy_id=1,
                             dimensions=model.dimensions, vector=query, post_ids=ids)
    for post_id, vector in vectors.items():
        assert vector.dtype == np.float32 and vector.shape == (model.dimensions,)
        cosine = float(vector @ query / (np.linalg.norm(vector) * np.linalg.norm(query)))
        assert cosine == pytest.approx(sims[post_id], abs=2e-3)  # halfvec precision
    conn.execute("UPDATE posts SET hidden = true WHERE id = %s", (ANSWER,))
    again = post_vectors(conn, model_id=model.id, strategy_id=1, dimensions=model.dimensions,
                         post_ids=ids)
    assert set(again) == set(ids) - {ANSWER}


def test_dump_fields_import_and_reimport(db_url: str, tmp_path: Path) -> None:
    upgrade(db_url)
    cats = [category(1, "Repairs", search_priority=4)]
    topics = [topic(10, "Sealant", 1, accepted_answer_post_id=101, posts_count=3),
              topic(11, "Brakes", 1, accepted_answer_post_id=100)]  # 100 is in topic 10
    posts = [post(100, 10, 1, "How much sealant?", like_count=1),
             post(101, 10, 2, "60 ml.", like_count=7, user_id=2, username="bob"),
             post(102, 10, 3, "Thanks", like_count=0),
             post(103, 11, 1, "Squeaky brakes")]
    dump = write_dump(tmp_path / "a", cats, topics, posts)
    with psycopg.connect(db_url) as c:
        report = import_dump(c, dump, "english").as_dict()
    assert report["warnings"] == [
        "topics.jsonl:2: accepted_answer_post_id 100 is not a post of this topic"]
    assert report["topics"]["rejected"] == 0
    with psycopg.connect(db_url) as c:
        solved = c.execute(ANSWERS_SQL).fetchall()
        likes = c.execute("SELECT like_count FROM topics WHERE id = 10").fetchone()
        prio = c.execute("SELECT search_priority FROM categories WHERE id = 1").fetchone()
        before = c.execute("SELECT id, updated_at FROM posts ORDER BY id").fetchall()
    assert solved == [(10, 101)] and likes == (8,) and prio == (4,)
    # More likes and another accepted answer: counters change, post timestamps do not.
    posts[2]["like_count"] = 5
    topics[0]["accepted_answer_post_id"] = 102
    again = write_dump(tmp_path / "b", cats, topics, posts)
    with psycopg.connect(db_url) as c:
        report = import_dump(c, again, "english").as_dict()
        assert report["posts"]["unchanged"] == 4
        solved = c.execute(ANSWERS_SQL).fetchall()
        likes = c.execute("SELECT like_count FROM topics WHERE id = 10").fetchone()
        after = c.execute("SELECT id, updated_at FROM posts ORDER BY id").fetchall()
    assert solved == [(10, 102)] and likes == (13,) and after == before
    # A dump without the optional fields clears the answer and reads as zero likes.
    plain = write_dump(tmp_path / "c", [category(1, "Repairs")],
                       [topic(10, "Sealant", 1, posts_count=3)],
                       [post(100, 10, 1, "How much sealant?")])
    with psycopg.connect(db_url) as c:
        import_dump(c, plain, "english")
        assert c.execute("SELECT count(*) FROM discourse_solved_solved_topics WHERE topic_id = 10"
                         ).fetchone() == (0,)
        assert c.execute(ANSWERS_SQL).fetchall() == []
        assert c.execute("SELECT search_priority FROM categories WHERE id = 1").fetchone() == (0,)
