"""`sidecar tune` on the served forum's own judgements: moderator labels and search_logs."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from models.protocols import Embedder
from sidecar.db.moderation import upsert_label
from sidecar.db.retrievals import RetrievalRow, insert_retrieval
from sidecar.errors import InvalidInput
from sidecar.tuning.session import run_tune
from tests.conftest import demo_forum, owner_url
from tests.helpers import add_members, demo_queries

MEMBERS = (9001, 9002, 9003)
PRIVATE_TOPIC_SQL = """
    SELECT t.id FROM topics t LEFT JOIN categories c ON c.id = t.category_id
    WHERE t.archetype <> 'regular' OR c.read_restricted ORDER BY t.id LIMIT 1"""


@pytest.fixture(scope="module")
def judged_forum(pg_admin_url: str, redis_url: str, minilm: Embedder,
                 tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The demo forum with labels on 6 retrievals and a search log of ~80 terms, each clicked
    by three members (a pair needs SIDECAR_CLICK_MIN_MEMBERS distinct members)."""
    with demo_forum(pg_admin_url, redis_url, tmp_path_factory.mktemp("judged"), minilm,
                    prefix="tune") as res:
        questions = demo_queries()
        with res.db.connection() as conn:
            for q in questions[:6]:
                rid = uuid.uuid4()
                insert_retrieval(conn, RetrievalRow(
                    id=rid, conversation=[{"role": "user", "content": q["text"]}],
                    query=q["text"], query_source="single_turn", zone="abstain",
                    scorer="bi-encoder:test"))
                upsert_label(conn, rid, label="should_have_answered",
                             right_topic_id=q["expected_topic_id"], note=None, moderator=None)
            private = conn.execute(PRIVATE_TOPIC_SQL).fetchone()
            assert private is not None
            titles = conn.execute(
                "SELECT id, title FROM topics WHERE archetype = 'regular' AND deleted_at IS NULL"
                " AND visible ORDER BY id").fetchall()
            rows: list[tuple[str, int | None, int | None]] = [
                (q["text"], q["expected_topic_id"], 1) for q in questions]
            rows += [(t["title"].lower(), t["id"], 1) for t in titles]
            rows += [("staff only", private["id"], 1),  # a private topic: never a judgement
                     ("someone", 3, 2),  # a user result, not a topic
                     ("no click", None, None)]
        # Discourse writes its search log: the forum's owner here, never the sidecar's role.
        with psycopg.connect(owner_url(res.urls.database_url)) as conn:
            add_members(conn, MEMBERS)
            for term, result_id, result_type in rows:
                for uid in MEMBERS:
                    conn.execute(
                        "INSERT INTO search_logs (term, user_id, ip_address, search_result_id,"
                        " search_type, created_at, search_result_type)"
                        " VALUES (%s, %s, '10.0.1.1', %s, 2, now(), %s)",
                        (term, uid, result_id, result_type))
            for _ in range(5):  # one visitor clicking a topic five times judges nothing
                conn.execute(
                    "INSERT INTO search_logs (term, ip_address, search_result_id, search_type,"
                    " created_at, search_result_type) VALUES ('planted', '10.0.9.9', %s, 2,"
                    " now(), 1)", (titles[0]["id"],))
        yield res


def test_tune_reads_labels_and_clicks_weighted_by_propensity(
    judged_forum: Any, minilm: Embedder, tmp_path: Path
) -> None:
    settings = judged_forum.settings
    # The forum has discourse-solved's current tables: the old answer column is gone.
    with psycopg.connect(owner_url(settings.database_url)) as conn:
        assert conn.execute("SELECT to_regclass('discourse_solved_topic_answers')").fetchone()[0]
        assert not conn.execute(
            "SELECT 1 FROM pg_attribute WHERE attname = 'answer_post_id' AND NOT attisdropped"
            " AND attrelid = 'discourse_solved_solved_topics'::regclass").fetchone()
    doc, profile = run_tune(settings, dump=None, resamples=200, progress=False, embedder=minilm)
    judged = doc["judgements"]
    assert judged["by_source"]["labels"] == 6
    # Every demo question and every public title clicked once; the private topic, the user
    # result and the search without a click are not judgements.
    with psycopg.connect(settings.database_url) as conn:
        public_titles = conn.execute(
            "SELECT count(DISTINCT p.topic_id) FROM posts p JOIN topics t ON t.id = p.topic_id"
            " JOIN categories c ON c.id = t.category_id WHERE NOT c.read_restricted AND"
            " t.archetype = 'regular' AND t.visible AND t.deleted_at IS NULL").fetchone()
    assert public_titles is not None
    assert 36 <= judged["by_source"]["search_log"] <= 36 + public_titles[0]
    assert judged["weighted"] is True  # clicks carry inverse-propensity weights
    assert judged["queries"] == judged["by_source"]["labels"] + judged["by_source"]["search_log"]
    # The folds were drawn with a fresh seed, recorded in the report and the profile.
    assert isinstance(doc["meta"]["seed"], int)
    assert profile.tuning["seed"] == doc["meta"]["seed"]
    # Held-out figures only, against the three references, each with a CI.
    against = doc["cross_validation"]["against"]
    assert set(against) == {"semantic", "keyword", "default"}
    for per in against.values():
        assert per["mrr@10"]["ci_low"] <= per["mrr@10"]["mean_diff"] <= per["mrr@10"]["ci_high"]
    assert profile.model == minilm.name
    assert profile.served.to_config().describe() == doc["served"]["describe"]
    assert json.loads(profile.model_dump_json())["tuning"]["judgements"] == judged


def test_tune_refuses_too_few_judgements(judged_forum: Any, minilm: Embedder) -> None:
    with pytest.raises(InvalidInput, match=r"labels: 6.*6 judged queries, 50 needed"):
        run_tune(judged_forum.settings, dump=None, sources=["labels"], progress=False,
                 embedder=minilm)


def test_the_command_draws_its_folds_with_a_fresh_seed_unless_given_one() -> None:
    from sidecar.cli.tune import tune_cmd

    seed = next(p for p in tune_cmd.params if p.name == "seed")
    assert seed.default is None  # a fixed public default would make the split predictable
