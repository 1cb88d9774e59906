"""Moderators see the answers: each retrieval's asks in the review list and detail (JSON and
HTML), the outcome filter, and the answer withheld once a post it cites is no longer public.

Asks are stored by the ask log's own adapter (``insert_answer``, as ``/v1/answer`` and
``/v1/sanitize`` store them) beside retrievals stored as ``/v1/retrieve`` does.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from sidecar.db.answers import AnswerRow, insert_answer
from tests.moderation.conftest import add_retrieval
from tests.moderation.test_moderation_pages import login

LIST = "/v1/moderation/retrievals"
# What a sanitized answer may hold that a page must show as text: Markdown, and an angle
# bracket a member typed (the sanitizer keeps it as text; the page must not make it HTML).
ANSWER = ("Relay WireGuard through a small VPS [1](https://forum.example.org/t/x/{topic}/1); "
          "keep `PersistentKeepalive = 25` <script>alert('x')</script>\n\n---\n\n**Sources**\n\n"
          "- \\[1\\] [{title}](https://forum.example.org/t/x/{topic}/1)")


@pytest.fixture
def public_post(clean_retrievals: str) -> Iterator[dict[str, Any]]:
    """A public post of the demo forum, made public again after the test if it hid it."""
    with psycopg.connect(clean_retrievals) as conn:
        row = conn.execute(
            "SELECT p.id, p.topic_id, p.post_number, t.title FROM posts p"
            " JOIN topics t ON t.id = p.topic_id JOIN categories c ON c.id = t.category_id"
            " WHERE p.post_type = 1 AND NOT p.hidden AND p.deleted_at IS NULL AND t.visible"
            " AND t.archetype = 'regular' AND NOT c.read_restricted AND c.parent_category_id"
            " IS NULL ORDER BY p.id LIMIT 1").fetchone()
    assert row is not None
    yield {"id": row[0], "topic_id": row[1], "post_number": row[2], "title": row[3]}
    with psycopg.connect(clean_retrievals) as conn:
        conn.execute("UPDATE posts SET hidden = false WHERE id = %s", (row[0],))


def _retrieval(db_url: str, zone: str, post: dict[str, Any], query: str,
               created_at: datetime | None = None) -> str:
    rid = add_retrieval(db_url, zone=zone, score=0.5, query=query, top_topic=post["topic_id"],
                        created_at=created_at)
    evidence = [{"n": 1, "topic_id": post["topic_id"], "title": f"{post['title']} EVIDENCE",
                 "post_id": post["id"], "post_number": post["post_number"],
                 "url": f"https://forum.example.org/t/x/{post['topic_id']}/1",
                 "excerpt": "an excerpt", "score": 0.5, "neighbours": []}]
    with psycopg.connect(db_url) as conn:
        conn.execute("UPDATE sidecar.sidecar_retrievals SET evidence = %s WHERE id = %s",
                     (Jsonb(evidence), rid))
    return rid


def _ask(state: Any, rid: str, outcome: str, *, answer: str = "", cited: list[int] | None = None,
         stage: str | None = None, source: str = "answer") -> None:
    with state.db.connection() as conn:
        insert_answer(conn, AnswerRow(
            id=uuid.uuid4(), retrieval_id=uuid.UUID(rid), source=source, outcome=outcome,
            answer=answer, failure_stage=stage, failure="timeout" if stage else None,
            llm="ollama", model="qwen3:30b-a3b", cited_post_ids=cited or [],
            removed={"citations": 1, "links": 2, "html": 0}, total_ms=812.5,
            first_token_ms=120.0))


@pytest.fixture
def asked(mod_state: Any, clean_retrievals: str, public_post: dict[str, Any]
          ) -> dict[str, Any]:
    """Four retrievals: answered (normal zone), abstained, failed (cautious), and one never
    asked (cautious)."""
    now = datetime.now(UTC)
    post = public_post
    answered = _retrieval(clean_retrievals, "normal", post, "wireguard behind cgnat",
                          now - timedelta(minutes=4))
    _ask(mod_state, answered, "answered",
         answer=ANSWER.format(topic=post["topic_id"], title=post["title"]), cited=[post["id"]])
    abstained = _retrieval(clean_retrievals, "abstain", post, "chocolate cake recipe",
                           now - timedelta(minutes=3))
    _ask(mod_state, abstained, "abstained", answer="The forum has no answer to this yet.")
    failed = _retrieval(clean_retrievals, "cautious", post, "zfs scrub errors",
                        now - timedelta(minutes=2))
    _ask(mod_state, failed, "failed", answer="Posts that may answer: [1]", cited=[post["id"]],
         stage="generate")
    silent = _retrieval(clean_retrievals, "cautious", post, "nas power draw",
                        now - timedelta(minutes=1))
    return {"answered": answered, "abstained": abstained, "failed": failed, "silent": silent,
            "post": post}


def test_the_list_and_detail_show_each_answer(
    mod_client: Any, api_auth: dict[str, str], asked: dict[str, Any]
) -> None:
    body = mod_client.get(LIST, headers=api_auth).json
    # The review list is still the abstain and cautious retrievals; each carries its asks.
    items = {i["id"]: i for i in body["items"]}
    assert set(items) == {asked["abstained"], asked["failed"], asked["silent"]}
    assert items[asked["silent"]]["answers"] == []
    (abstained,) = items[asked["abstained"]]["answers"]
    assert (abstained["outcome"], abstained["markdown"], abstained["cited"]) == (
        "abstained", "The forum has no answer to this yet.", [])
    (failed,) = items[asked["failed"]]["answers"]
    assert (failed["outcome"], failed["failure_stage"], failed["failure"]) == (
        "failed", "generate", "timeout")

    detail = mod_client.get(f"{LIST}/{asked['answered']}", headers=api_auth).json
    (ask,) = detail["answers"]
    post = asked["post"]
    assert ask["markdown"] == ANSWER.format(topic=post["topic_id"], title=post["title"])
    assert (ask["outcome"], ask["source"], ask["model"], ask["llm"], ask["withheld"]) == (
        "answered", "answer", "qwen3:30b-a3b", "ollama", False)
    assert ask["removed"] == {"citations": 1, "links": 2, "html": 0}
    assert ask["cited"] == [{"n": 1, "post_id": post["id"], "title": f"{post['title']} EVIDENCE",
                             "url": f"https://forum.example.org/t/x/{post['topic_id']}/1",
                             "withheld": False}]
    assert (ask["total_ms"], ask["first_token_ms"]) == (812.5, 120.0)
    never = mod_client.get(f"{LIST}/{asked['silent']}", headers=api_auth).json
    assert never["answers"] == []


@pytest.mark.parametrize(("params", "expected"), [
    ({"outcome": "answered"}, ["answered"]),  # a normal zone's answer: every zone is searched
    ({"outcome": "abstained"}, ["abstained"]),
    ({"outcome": "failed", "zone": "cautious"}, ["failed"]),
    ({"outcome": "failed", "zone": "abstain"}, []),
    ({"outcome": "answered", "q": "cgnat"}, ["answered"]),
    ({"outcome": "answered", "q": "zfs"}, []),
    ({"outcome": "no_answer"}, []),
    ({"zone": "normal"}, ["answered"]),
])
def test_the_outcome_filter(mod_client: Any, api_auth: dict[str, str], asked: dict[str, Any],
                            params: dict[str, str], expected: list[str]) -> None:
    body = mod_client.get(LIST, headers=api_auth, query_string=params).json
    assert [i["id"] for i in body["items"]] == [asked[k] for k in expected]
    assert body["total"] == len(expected)


def test_an_unknown_outcome_is_refused(mod_client: Any, api_auth: dict[str, str]) -> None:
    resp = mod_client.get(LIST, headers=api_auth, query_string={"outcome": "maybe"})
    assert resp.status_code == 422
    assert resp.json["error"]["code"] == "invalid_input"
    assert resp.json["error"]["details"][0]["loc"] == "outcome"
    assert login(mod_client).status_code == 303
    page = mod_client.get("/moderation/?outcome=maybe")
    assert page.status_code == 422
    html = page.get_data(as_text=True)
    assert "outcome" in html and "&#39;answered&#39;" in html  # what it must be instead


def test_the_pages_show_the_answers_as_text(mod_client: Any, asked: dict[str, Any]) -> None:
    assert login(mod_client).status_code == 303
    listing = mod_client.get("/moderation/").get_data(as_text=True)
    assert 'class="outcome-abstained">abstained<' in listing
    assert 'class="outcome-failed">failed<' in listing and "at generate" in listing
    assert 'id="count-answered">1<' in listing
    only = mod_client.get("/moderation/?outcome=answered").get_data(as_text=True)
    assert "wireguard behind cgnat" in only and "chocolate cake" not in only
    assert "Asks that ended “answered”" in only

    page = mod_client.get(f"/moderation/retrievals/{asked['answered']}").get_data(as_text=True)
    assert "<script>alert" not in page  # the answer is text, never HTML
    assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in page
    assert "**Sources**" in page and "qwen3:30b-a3b" in page
    assert "citations: 1, html: 0, links: 2" in page
    post = asked["post"]
    assert f'href="https://forum.example.org/t/x/{post["topic_id"]}/1"' in page
    silent = mod_client.get(f"/moderation/retrievals/{asked['silent']}").get_data(as_text=True)
    assert 'id="no-answers"' in silent


def test_an_answer_citing_a_post_no_longer_public_is_withheld(
    mod_client: Any, api_auth: dict[str, str], asked: dict[str, Any], clean_retrievals: str
) -> None:
    post = asked["post"]
    with psycopg.connect(clean_retrievals) as conn:  # the cited post is hidden since
        conn.execute("UPDATE posts SET hidden = true WHERE id = %s", (post["id"],))
    detail = mod_client.get(f"{LIST}/{asked['answered']}", headers=api_auth).json
    (ask,) = detail["answers"]
    assert (ask["markdown"], ask["withheld"]) == (None, True)
    assert ask["cited"] == [{"n": 1, "post_id": None, "title": None, "url": None,
                             "withheld": True}]
    assert ask["outcome"] == "answered" and ask["removed"]["links"] == 2
    assert "PersistentKeepalive" not in json.dumps(detail)
    assert f"{post['title']} EVIDENCE" not in json.dumps(detail["answers"])
    # The abstain text holds no post's words: still shown.
    listing = mod_client.get(LIST, headers=api_auth).json
    shown = {i["id"]: i["answers"] for i in listing["items"]}
    assert shown[asked["abstained"]][0]["markdown"] == "The forum has no answer to this yet."
    assert shown[asked["failed"]][0]["withheld"] is True
    assert "Posts that may answer" not in json.dumps(listing)

    assert login(mod_client).status_code == 303
    page = mod_client.get(f"/moderation/retrievals/{asked['answered']}").get_data(as_text=True)
    # (the topic's title may still show among the candidates: its other posts are public)
    assert "PersistentKeepalive" not in page and f"{post['title']} EVIDENCE" not in page
    assert "no longer public" in page
    html_list = mod_client.get("/moderation/?outcome=failed").get_data(as_text=True)
    assert "Posts that may answer" not in html_list and "withheld" in html_list
