"""A tiny evaluation dump (forum + queries + qrels) written by the tests, never the real data."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.conftest import make_settings
from tests.helpers import category, post, topic, write_dump, write_jsonl

# Eight public topics on distinct subjects, each a question and two replies.
SUBJECTS: list[tuple[str, str, str, str]] = [
    ("Opening a bank account in Doha",
     "Which bank is good for opening a salary account as a new expat?",
     "QNB opened my account in two days with my residence permit.",
     "I would avoid the small banks, their online banking is poor."),
    ("Best beaches for a weekend trip",
     "Where can we swim and relax at the sea on Friday?",
     "Sealine beach has soft sand dunes and calm water.",
     "Fuwairit is quiet and turtles nest there in spring."),
    ("Renting a car for one month",
     "I need a cheap rental car for four weeks for my work commute.",
     "Monthly rental from the airport agencies costs around 1500 riyals.",
     "Ask for a long term lease discount, they always negotiate."),
    ("Transferring my driving licence",
     "Can I convert my European driving licence without a test?",
     "Some countries are exempt, you only need an eye test at the traffic department.",
     "Bring your passport copy and the original licence."),
    ("Family visit visa for my parents",
     "How long does a family visit visa for parents take to process?",
     "It took about a week with the salary certificate attached.",
     "Your salary must be above the minimum for sponsoring visitors."),
    ("Cheapest home internet provider",
     "Which fibre internet plan is the cheapest for streaming?",
     "The 100 Mbps fibre plan is enough for two people streaming.",
     "Check the installation fee, it is sometimes waived."),
    ("Arabic language classes for adults",
     "Any recommended evening Arabic lessons for beginners?",
     "The cultural centre runs cheap evening classes twice a week.",
     "A private tutor helped me with pronunciation faster."),
    ("Finding a good dentist",
     "My tooth hurts, who is a reliable dentist for a filling?",
     "The clinic near the souq did my root canal painlessly.",
     "Insurance usually covers fillings but not whitening."),
]
PRIVATE_TOPIC = 99  # in a read-restricted category: must never be returned
CANARY = "CANARYZEBRA"


def _dump_rows() -> tuple[list[Any], list[Any], list[Any]]:
    cats = [category(1, "General"), category(2, "Staff", restricted=True)]
    topics: list[Any] = []
    posts: list[Any] = []
    pid = 1
    for i, (title, question, reply1, reply2) in enumerate(SUBJECTS, start=1):
        topics.append(topic(i, title, 1, posts_count=3))
        for number, raw in enumerate((question, reply1, reply2), start=1):
            posts.append(post(pid, i, number, raw))
            pid += 1
    topics.append(topic(PRIVATE_TOPIC, "Staff bank salary negotiations", 2))
    posts.append(post(1000, PRIVATE_TOPIC, 1,
                      f"{CANARY} internal note about bank accounts and salary accounts"))
    return cats, topics, posts


QUERIES = [
    # (id, text, {topic: grade}, {post: grade})
    ("Q1", "Good bank\nWhich bank should I choose for my salary account?",
     {1: 2, 6: 0, 3: 0}, {2: 2, 3: 0}),
    ("Q2", "Weekend at the sea\nWhere is a nice beach to swim on Friday?",
     {2: 2, 8: 0, 4: 0}, {5: 2, 6: 1}),
    ("Q3", "Rent a car\nLooking for a monthly car rental for my daily commute",
     {3: 2, 4: 1, 1: 0}, {8: 2, 9: 1}),
    ("Q4", "Dental problem\nRecommend a dentist for a tooth filling",
     {8: 1, 7: 0, 5: 0}, {23: 2}),
    ("Q5", "Nothing relevant\nHow do I grow tomatoes on a balcony?",
     {1: 0, 2: 0}, {}),
]


def write_eval_dump(directory: Path) -> Path:
    """The tiny dump: forum files, queries.jsonl, qrels_topic.tsv and qrels_post.tsv."""
    cats, topics, posts = _dump_rows()
    write_dump(directory, cats, topics, posts)
    write_jsonl(directory / "queries.jsonl", [
        {"id": qid, "split": "test", "text": text, "subject": text.split("\n")[0],
         "body": text.split("\n")[1]} for qid, text, _, _ in QUERIES])
    with (directory / "qrels_topic.tsv").open("w") as handle:
        handle.write("query_id\ttopic_id\tgrade\n")
        for qid, _, topic_grades, _ in QUERIES:
            for tid, grade in topic_grades.items():
                handle.write(f"{qid}\t{tid}\t{grade}\n")
    with (directory / "qrels_post.tsv").open("w") as handle:
        handle.write("query_id\tpost_id\tgrade\n")
        for qid, _, _, post_grades in QUERIES:
            for post_id, grade in post_grades.items():
                handle.write(f"{qid}\t{post_id}\t{grade}\n")
    return directory


@pytest.fixture
def eval_dump(tmp_path: Path) -> Path:
    """A fresh copy of the tiny evaluation dump."""
    return write_eval_dump(tmp_path / "dump")


def _eval_databases(admin_url: str) -> list[str]:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        return [r[0] for r in conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'sidecar_eval_%'").fetchall()]


@pytest.fixture
def eval_settings(tmp_path: Path, db_url: str, redis_url: str, minilm_dir: Path
                  ) -> Iterator[Any]:
    """Settings whose DATABASE_URL is a fresh test database; evaluation databases created on
    that server by the test are dropped afterwards."""
    settings = make_settings(tmp_path, db_url, redis_url, embed_model_path=minilm_dir)
    before = set(_eval_databases(db_url))
    yield settings
    with psycopg.connect(db_url, autocommit=True) as conn:
        for name in set(_eval_databases(db_url)) - before:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(name)))
