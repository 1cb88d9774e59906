"""Judgements the forum holds join the mined questions: moderators' labels and search-log
clicks, asked of the topic they name; never of a private topic, never of an excluded one. A
click counts once enough distinct members made it; a label (its question may come from a
private conversation) is only ever measured, held out, never trained on."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from models.protocols import Embedder
from sidecar.db.moderation import upsert_label
from sidecar.db.retrievals import RetrievalRow, insert_retrieval
from sidecar.training.mining import MiningRules
from sidecar.training.source import mine
from tests.conftest import demo_forum, owner_url
from tests.helpers import add_members

RULES = MiningRules(min_words=6, positives=2, hard=3, random=1)
LABELLED = "my pool lost a disk overnight, what now"
PRIVATE_LABEL = "a question a moderator pinned on a staff topic"
CLICKED = "grow raidz"
CLICKED_ONCE = "looked around once"
CLICKED_BY_ONE = "planted by one member"
MEMBERS = (9001, 9002, 9003)

THREAD_SQL = """
    SELECT p.topic_id FROM posts p JOIN topics t ON t.id = p.topic_id
    JOIN categories c ON c.id = t.category_id
    WHERE p.post_number = 2 AND NOT c.read_restricted AND t.archetype = 'regular'
      AND t.visible AND t.deleted_at IS NULL AND p.deleted_at IS NULL AND NOT p.hidden
      AND p.post_type = 1
    ORDER BY p.topic_id LIMIT 2"""
PRIVATE_TOPIC_SQL = """
    SELECT t.id FROM topics t LEFT JOIN categories c ON c.id = t.category_id
    WHERE t.archetype <> 'regular' OR c.read_restricted ORDER BY t.id LIMIT 1"""


@pytest.fixture(scope="module")
def judged(pg_admin_url: str, redis_url: str, minilm: Embedder,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, int, int]]:
    """The demo forum with two labels (one on a private topic) and a search log."""
    with demo_forum(pg_admin_url, redis_url, tmp_path_factory.mktemp("judged-mining"), minilm,
                    prefix="t_jmine") as res:
        with res.db.connection() as conn:
            labelled, clicked = (r["topic_id"] for r in conn.execute(THREAD_SQL).fetchall())
            private = conn.execute(PRIVATE_TOPIC_SQL).fetchone()["id"]
            for text, topic in ((LABELLED, labelled), (PRIVATE_LABEL, private)):
                rid = uuid.uuid4()
                insert_retrieval(conn, RetrievalRow(
                    id=rid, conversation=[{"role": "user", "content": text}], query=text,
                    query_source="single_turn", zone="abstain", scorer="bi-encoder:test"))
                upsert_label(conn, rid, label="should_have_answered", right_topic_id=topic,
                             note=None, moderator=None)
        # Discourse writes its search log: the forum's owner here, never the sidecar's role.
        with psycopg.connect(owner_url(res.urls.database_url)) as conn:
            add_members(conn, MEMBERS)
            rows = [(CLICKED, clicked, uid) for uid in MEMBERS]
            rows += [(CLICKED, private, uid) for uid in MEMBERS]
            rows += [(CLICKED_ONCE, clicked, MEMBERS[0])]
            rows += [(CLICKED_BY_ONE, clicked, MEMBERS[1])] * 5
            for term, topic, uid in rows:
                conn.execute(
                    "INSERT INTO search_logs (term, user_id, ip_address, search_result_id,"
                    " search_type, created_at, search_result_type)"
                    " VALUES (%s, %s, '10.0.1.1', %s, 2, now(), 1)", (term, uid, topic))
        yield res, labelled, clicked


def test_labels_and_clicks_are_asked_of_the_public_topic_they_name(
        judged: tuple[Any, int, int]) -> None:
    res, labelled, clicked = judged
    # A sample of one thread: the judged topics are read beyond it.
    mined = mine(res, rules=RULES, max_threads=1, held_share=0.0, seed="j", progress=False)
    assert mined.judged == 2 and mined.labelled == 1
    assert (CLICKED, clicked) in {(p.question, p.topic_id) for p in mined.train
                                  if p.label == 1.0}
    # The label is asked of its topic held out (measured by the guard), and neither it nor
    # its topic is ever trained on, though nothing else is held out (held_share 0).
    assert (LABELLED, labelled) in {(p.question, p.topic_id) for p in mined.held
                                    if p.label == 1.0 and p.judged}
    assert LABELLED not in {p.question for p in mined.train}
    assert labelled not in {p.topic_id for p in mined.train}
    assert not [p for p in mined.held if p.topic_id != labelled]
    asked = {p.question for p in mined.train + mined.held}
    # A private topic is never a judgement; a click by one member, however many times, is
    # not one either.
    assert PRIVATE_LABEL not in asked
    assert CLICKED_ONCE not in asked and CLICKED_BY_ONE not in asked
    assert not [p for p in mined.train if p.question == CLICKED and p.topic_id != clicked]
    assert mined.as_dict()["labelled_questions_held_out"] == 1


def test_an_excluded_topic_s_judgements_are_never_read(judged: tuple[Any, int, int]) -> None:
    res, labelled, clicked = judged
    mined = mine(res, rules=RULES, max_threads=1000, held_share=0.0, seed="j",
                 exclude={labelled, clicked}, progress=False)
    assert mined.judged == 0
    assert not {p.topic_id for p in mined.train} & {labelled, clicked}
    assert not {p.question for p in mined.train} & {LABELLED, CLICKED}
