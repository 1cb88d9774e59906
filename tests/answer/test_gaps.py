"""The content-gap view (``GET /v1/moderation/gaps``, ``/moderation/gaps``) over asks made
through the real service: MiniLM's query vectors, kept when an ask abstains or ends
``no_answer``, grouped into subjects."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from pydantic import SecretStr

from tests.answer.ollama_server import OllamaServer
from tests.answer.test_answer import WIREGUARD, ask
from tests.conftest import API_KEY, owner_url
from tests.moderation.test_moderation_pages import login

KEY = "mod-9c1f3b7e55a04d2f8e6a1c0b7d93e4f2"
MOD = {"Authorization": f"Bearer {KEY}"}
GAPS = "/v1/moderation/gaps"
KNITTING = ("How do I knit a wool scarf for beginners?",
            "What needles should I use to knit a chunky scarf?",
            "How do I cast on stitches when knitting a scarf?")
PUPPY = ("How do I stop my puppy from biting?",
         "What is the best way to house-train a puppy?")
OTHERS = ("How do I tune a violin by ear?", "Which flowers grow well in a shady garden?",
          "How long should I boil an egg for a runny yolk?",
          "What is the offside rule in football?", "How do I plan a wedding on a budget?")


@pytest.fixture
def gap_client(make_client: Callable[..., Any], fake_ollama: OllamaServer) -> Any:
    """Answers from the Ollama-speaking server, moderation on."""
    return make_client(ollama_url=fake_ollama.url, moderator_key=SecretStr(KEY))


def _abstain(client: Any, question: str) -> dict[str, Any]:
    body = ask(client, question).json
    assert (body["zone"], body["outcome"]) == ("abstain", "abstained"), (question, body)
    return dict(body)


def _group_of(report: dict[str, Any], retrieval_id: str) -> dict[str, Any]:
    (group,) = [g for g in report["groups"]
                if retrieval_id in {q["retrieval_id"] for q in g["examples"]}]
    return dict(group)


def test_unanswered_questions_are_grouped_by_subject(
    gap_client: Any, fake_ollama: OllamaServer
) -> None:
    knitting = [_abstain(gap_client, q)["retrieval_id"] for q in KNITTING]
    puppy = [_abstain(gap_client, q)["retrieval_id"] for q in PUPPY]
    fake_ollama.behaviour.reply = "NO\\_ANSWER: the posts do not say."
    refused = ask(gap_client, WIREGUARD).json
    assert refused["outcome"] == "no_answer"
    assert fake_ollama.chat_calls == 1  # the abstentions cost no LLM call

    resp = gap_client.get(GAPS, headers=MOD, query_string={"days": 30, "examples": 50})
    assert resp.status_code == 200, resp.json
    report = resp.json
    assert report["model"] == gap_client.resources.model.name and report["days"] == 30
    assert report["similarity"] == 0.5 and report["capped"] is False

    group = _group_of(report, knitting[0])
    assert group["count"] == 3
    assert [q["retrieval_id"] for q in group["examples"]] == knitting[::-1]  # newest first
    assert [q["query"] for q in group["examples"]] == list(KNITTING[::-1])
    assert {q["outcome"] for q in group["examples"]} == {"abstained"}
    dogs = _group_of(report, puppy[0])
    assert dogs["count"] == 2 and dogs != group
    assert {q["retrieval_id"] for q in dogs["examples"]} == set(puppy)
    assert not {q["query"] for q in dogs["examples"]} & set(KNITTING)
    found = _group_of(report, refused["retrieval_id"])
    assert {q["outcome"] for q in found["examples"]
            if q["retrieval_id"] == refused["retrieval_id"]} == {"no_answer"}
    counts = [g["count"] for g in report["groups"]]
    assert counts == sorted(counts, reverse=True)
    assert report["questions"] == sum(counts)

    # Fewer examples, the same counts.
    short = gap_client.get(GAPS, headers=MOD, query_string={"examples": 1}).json
    assert _group_of(short, knitting[2]) == {**group, "examples": group["examples"][:1]}


def test_the_period_and_the_model(gap_client: Any) -> None:
    knitting = [_abstain(gap_client, q)["retrieval_id"] for q in KNITTING]
    url = owner_url(gap_client.resources.urls.database_url)
    with psycopg.connect(url) as conn:  # asked 40 days ago
        conn.execute("UPDATE sidecar.sidecar_retrievals SET created_at = now() - interval"
                     " '40 days' WHERE id = %s", (knitting[0],))
    month = gap_client.get(GAPS, headers=MOD, query_string={"days": 30, "examples": 50}).json
    assert knitting[0] not in json.dumps(month)
    assert _group_of(month, knitting[1])["count"] >= 2
    both = gap_client.get(GAPS, headers=MOD, query_string={"days": 60, "examples": 50}).json
    assert _group_of(both, knitting[1]) == _group_of(both, knitting[0])

    with psycopg.connect(url) as conn:  # embedded by another model: not comparable, left out
        conn.execute("UPDATE sidecar.sidecar_retrievals SET gap_model = 'another-model'"
                     " WHERE id = %s", (knitting[2],))
    again = gap_client.get(GAPS, headers=MOD, query_string={"days": 60, "examples": 50}).json
    assert knitting[2] not in json.dumps(again)
    # An unanswered question answered since (a later /v1/sanitize) is no gap any more.
    with psycopg.connect(url) as conn:
        conn.execute("INSERT INTO sidecar.sidecar_answers (id, retrieval_id, source, outcome)"
                     " VALUES (%s, %s, 'sanitize', 'answered')", (uuid.uuid4(), knitting[1]))
    later = gap_client.get(GAPS, headers=MOD, query_string={"days": 60, "examples": 50}).json
    assert knitting[1] not in json.dumps(later)


def test_the_most_recent_questions_are_read(make_client: Callable[..., Any],
                                            fake_ollama: OllamaServer) -> None:
    client = make_client(ollama_url=fake_ollama.url, moderator_key=SecretStr(KEY),
                         gap_max_questions=10)
    ids = [_abstain(client, q)["retrieval_id"] for q in (*OTHERS, *OTHERS, *PUPPY[:1])]
    report = client.get(GAPS, headers=MOD, query_string={"examples": 50}).json
    assert (report["questions"], report["capped"]) == (10, True)
    shown = {q["retrieval_id"] for g in report["groups"] for q in g["examples"]}
    assert shown == set(ids[-10:])  # the newest ten


@pytest.mark.parametrize("params", [{"days": "0"}, {"days": "366"}, {"days": "x"},
                                    {"examples": "0"}, {"examples": "51"}, {"since": "2026"}])
def test_bad_parameters_are_422(gap_client: Any, params: dict[str, str]) -> None:
    resp = gap_client.get(GAPS, headers=MOD, query_string=params)
    assert resp.status_code == 422, resp.json
    assert resp.json["error"]["code"] == "invalid_input"


def test_the_gaps_need_the_moderator_key(gap_client: Any) -> None:
    for headers in ({}, {"Authorization": f"Bearer {API_KEY}"}, {"Authorization": "Bearer no"}):
        resp = gap_client.get(GAPS, headers=headers)
        assert resp.status_code == 401 and resp.json["error"]["code"] == "unauthorized"
    page = gap_client.get("/moderation/gaps")
    assert page.status_code == 303 and "/moderation/login" in page.headers["Location"]


def test_the_page_shows_questions_never_posts(gap_client: Any) -> None:
    body = _abstain(gap_client, KNITTING[0])
    assert login(gap_client, key=KEY).status_code == 303
    html = gap_client.get("/moderation/gaps?days=7").get_data(as_text=True)
    assert "Content gaps" in html and KNITTING[0] in html
    assert f'/moderation/retrievals/{body["retrieval_id"]}' in html
    report = gap_client.get(GAPS, headers=MOD, query_string={"examples": 50}).json
    text = json.dumps(report) + html
    # An abstention still stores the evidence it found; none of it is shown here.
    for e in body["evidence"]:
        assert e["title"] not in text and e["url"] not in text
    assert "excerpt" not in text and "evidence" not in json.dumps(report)
    wrong = gap_client.get("/moderation/gaps?days=0")
    assert wrong.status_code == 422 and "days" in wrong.get_data(as_text=True)
