"""`sidecar import`: validation with file and line, idempotence, edits, search data."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from sidecar.db.migrate import upgrade
from sidecar.errors import ConfigurationError, InvalidInput
from sidecar.ingest.importer import import_dump
from tests.helpers import category, post, topic, write_dump


def good_dump(directory: Path) -> Path:
    return write_dump(
        directory,
        [category(1, "Repairs"), category(2, "Staff", restricted=True)],
        [topic(10, "Tubeless tyre sealant", 1, tags=["MTB", "tyres"], posts_count=2),
         topic(11, "Private note", None, archetype="private_message")],
        [post(100, 10, 1, "How much **sealant** for a 29er?"),
         post(101, 10, 2, "About 60 ml per tyre.", username="bob", user_id=2),
         post(102, 11, 1, "secret")],
    )


def run_import(url: str, directory: Path) -> dict:  # type: ignore[type-arg]
    with psycopg.connect(url) as conn:
        return import_dump(conn, directory, "english").as_dict()


def test_import_loads_rows_and_reimport_changes_nothing(db_url: str, tmp_path: Path) -> None:
    upgrade(db_url)
    dump = good_dump(tmp_path / "dump")
    first = run_import(db_url, dump)
    assert first["posts"] == {"read": 3, "inserted": 3, "updated": 0, "unchanged": 0,
                              "rejected": 0}
    assert first["topics"]["inserted"] == 2 and first["categories"]["inserted"] == 2
    with psycopg.connect(db_url) as conn:
        before = conn.execute("SELECT id, updated_at FROM posts ORDER BY id").fetchall()
        tags = conn.execute("SELECT name FROM tags ORDER BY name").fetchall()
        cooked = conn.execute("SELECT cooked FROM posts WHERE id = 100").fetchone()
    assert [t[0] for t in tags] == ["mtb", "tyres"]
    assert cooked is not None and "<strong>sealant</strong>" in cooked[0]
    again = run_import(db_url, dump)
    assert again["posts"]["unchanged"] == 3 and again["posts"]["updated"] == 0
    assert again["topics"]["unchanged"] == 2
    with psycopg.connect(db_url) as conn:
        after = conn.execute("SELECT id, updated_at FROM posts ORDER BY id").fetchall()
    assert after == before


def test_an_edited_post_is_updated_and_its_timestamp_moves(db_url: str, tmp_path: Path) -> None:
    upgrade(db_url)
    run_import(db_url, good_dump(tmp_path / "a"))
    with psycopg.connect(db_url) as conn:
        old = conn.execute("SELECT updated_at, version FROM posts WHERE id = 101").fetchone()
    edited = write_dump(
        tmp_path / "b",
        [category(1, "Repairs"), category(2, "Staff", restricted=True)],
        [topic(10, "Tubeless tyre sealant", 1, tags=["MTB", "tyres"], posts_count=2)],
        [post(100, 10, 1, "How much **sealant** for a 29er?"),
         post(101, 10, 2, "About 80 ml per tyre.", username="bob", user_id=2)],
    )
    report = run_import(db_url, edited)
    assert report["posts"]["updated"] == 1 and report["posts"]["unchanged"] == 1
    with psycopg.connect(db_url) as conn:
        new = conn.execute("SELECT updated_at, version, raw FROM posts WHERE id = 101").fetchone()
        search = conn.execute(
            "SELECT raw_data FROM post_search_data WHERE post_id = 101").fetchone()
    assert old is not None and new is not None
    assert new[0] > old[0] and new[1] == old[1] + 1 and "80 ml" in new[2]
    assert search is not None and "80 ml" in search[0]


def test_bad_rows_are_rejected_with_file_and_line(db_url: str, tmp_path: Path) -> None:
    upgrade(db_url)
    dump = write_dump(
        tmp_path / "dump",
        [category(1, "Repairs"), {"id": "x", "name": "", "slug": "s"}],
        [topic(10, "Good topic", 1),
         topic(11, "PM with a category", 1, archetype="private_message"),
         topic(12, "Unknown category", 99),
         "{not json"],
        [post(100, 10, 1, "fine"),
         post(101, 10, 2, "fine too"),
         post(100, 10, 3, "duplicate id"),
         post(103, 10, 2, "duplicate post number"),
         post(104, 77, 1, "unknown topic"),
         post(105, 10, 4, "bad type", post_type=9),
         post(106, 10, 5, "bad date", created_at="yesterday"),
         [1, 2, 3]],
    )
    with psycopg.connect(db_url) as conn:
        report = import_dump(conn, dump, "english")
    where = {(e.file, e.line) for e in report.errors}
    assert where == {
        ("categories.jsonl", 2),
        ("topics.jsonl", 2), ("topics.jsonl", 3), ("topics.jsonl", 4),
        ("posts.jsonl", 3), ("posts.jsonl", 4), ("posts.jsonl", 5), ("posts.jsonl", 6),
        ("posts.jsonl", 7), ("posts.jsonl", 8),
    }
    messages = " | ".join(str(e) for e in report.errors)
    assert "unknown topic_id 77" in messages and "duplicate id 100 (first at line 1)" in messages
    assert "posts.jsonl:6: post_type" in messages
    assert report.posts.inserted == 2 and report.posts.rejected == 6
    assert report.topics.inserted == 1 and report.topics.rejected == 3


def test_a_post_number_taken_by_another_post_is_rejected(db_url: str, tmp_path: Path) -> None:
    upgrade(db_url)
    run_import(db_url, good_dump(tmp_path / "a"))
    clash = write_dump(tmp_path / "b", [], [], [post(999, 10, 2, "same slot, other id")])
    report = run_import(db_url, clash)
    assert report["posts"]["rejected"] == 1
    assert "already used by post 101" in report["errors"][0]


def test_search_data_is_weighted_like_discourse(db_url: str, tmp_path: Path) -> None:
    upgrade(db_url)
    run_import(db_url, good_dump(tmp_path / "dump"))
    with psycopg.connect(db_url) as conn:
        row = conn.execute(
            "SELECT search_data::text FROM post_search_data WHERE post_id = 101").fetchone()
    assert row is not None
    vector = row[0]
    assert "'tubeless':1A" in vector  # the topic title, weight A, in every post
    assert "'repair':" in vector and "B" in vector.split("'repair':")[1][:6]
    assert "'mtb':" in vector and "'60':" in vector


def test_import_refuses_a_real_forum_and_a_non_dump(db_url: str, tmp_path: Path) -> None:
    with psycopg.connect(db_url) as conn:
        conn.execute("""
            CREATE TABLE categories (id int, name varchar, slug varchar, read_restricted bool,
                parent_category_id int);
            CREATE TABLE topics (id int, title varchar, slug varchar, category_id int,
                archetype varchar, visible bool, deleted_at timestamp, bumped_at timestamp);
            CREATE TABLE posts (id int, topic_id int, post_number int, raw text, cooked text,
                deleted_at timestamp, hidden bool, hidden_at timestamp, post_type int,
                updated_at timestamp, reply_to_post_number int, user_deleted bool);
            CREATE TABLE tags (id int, name varchar);
            CREATE TABLE topic_tags (topic_id int, tag_id int);
            CREATE TABLE tag_group_memberships (tag_id int, tag_group_id int);
            CREATE TABLE tag_group_permissions (tag_group_id bigint, group_id bigint);
            CREATE TABLE post_search_data (post_id int, search_data tsvector);
            CREATE TABLE shared_drafts (id bigint, topic_id int);
        """)
    upgrade(db_url)
    with psycopg.connect(db_url) as conn, pytest.raises(ConfigurationError, match="real forum"):
        import_dump(conn, good_dump(tmp_path / "dump"), "english")
    empty = tmp_path / "empty"
    empty.mkdir()
    fresh_url = db_url
    with psycopg.connect(fresh_url) as conn, pytest.raises((InvalidInput, ConfigurationError)):
        import_dump(conn, empty, "english")
