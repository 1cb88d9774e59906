"""POST /v1/sanitize over HTTP: errors, locales, and the public re-check at the moment it runs."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from tests.sanitize.checker import audit
from tests.sanitize.conftest import FORUM, evidence_for, store_retrieval

URL = "/v1/sanitize"


def post_json(http: Any, auth: dict[str, str], body: Any) -> Any:
    return http.post(URL, json=body, headers=auth)


@pytest.fixture
def rid(forum_state: Any) -> str:
    """A retrieval citing two public posts of topic 27 (n=1: post 169, n=2: post 170)."""
    return store_retrieval(forum_state.urls.database_url,
                           evidence_for(forum_state.urls.database_url, [169, 170],
                                        neighbours={169: [171]}))


def test_needs_the_api_key(http: Any, rid: str) -> None:
    resp = http.post(URL, json={"retrieval_id": rid, "text": "x"})
    assert resp.status_code == 401
    assert resp.json["error"]["code"] == "unauthorized"


def test_unknown_retrieval_is_404(http: Any, auth: dict[str, str]) -> None:
    resp = post_json(http, auth, {"retrieval_id": str(uuid.uuid4()), "text": "hello [[1]]"})
    assert resp.status_code == 404
    assert resp.json["error"]["code"] == "not_found"
    assert "retrieval_id" in resp.json["error"]["message"]


@pytest.mark.parametrize(("body", "status", "code"), [
    (b"{not json", 400, "bad_request"),
    (b"[]", 422, "invalid_input"),
    (b'{"text": "x"}', 422, "invalid_input"),
    (b'{"retrieval_id": "not-a-uuid", "text": "x"}', 422, "invalid_input"),
    (b'{"retrieval_id": "6f1c7f2e-4a8e-4d9a-9d1e-0c2b3a4d5e6f"}', 422, "invalid_input"),
    (b'{"retrieval_id": "6f1c7f2e-4a8e-4d9a-9d1e-0c2b3a4d5e6f", "text": ""}', 422,
     "invalid_input"),
    (b'{"retrieval_id": "6f1c7f2e-4a8e-4d9a-9d1e-0c2b3a4d5e6f", "text": 42}', 422,
     "invalid_input"),
    (b'{"retrieval_id": "6f1c7f2e-4a8e-4d9a-9d1e-0c2b3a4d5e6f", "text": "x", "extra": 1}', 422,
     "invalid_input"),
])
def test_bad_input_is_a_clear_4xx(http: Any, auth: dict[str, str], body: bytes, status: int,
                                  code: str) -> None:
    resp = http.post(URL, data=body, headers={**auth, "Content-Type": "application/json"})
    assert resp.status_code == status, resp.json
    assert resp.json["error"]["code"] == code


def test_text_over_the_limit_is_413(http: Any, auth: dict[str, str], rid: str) -> None:
    resp = post_json(http, auth, {"retrieval_id": rid, "text": "a" * 50_001})
    assert resp.status_code == 413
    assert resp.json["error"]["code"] == "payload_too_large"
    assert "50000" in resp.json["error"]["message"]
    ok = post_json(http, auth, {"retrieval_id": rid, "text": "a" * 50_000})
    assert ok.status_code == 200


def test_cited_posts_link_to_their_current_url(http: Any, auth: dict[str, str], rid: str,
                                               forum_state: Any) -> None:
    resp = post_json(http, auth, {"retrieval_id": rid,
                                  "text": "Caddy [[1]], or see [the next reply](/t/x/27/3)."})
    assert resp.status_code == 200
    body = resp.json
    url1 = f"{FORUM}/t/traefik-caddy-ou-nginx-proxy-manager-pour-debuter/27/1"
    assert body["citations"] == [{
        "n": 1, "post_id": 169, "topic_id": 27, "url": url1,
        "title": "Traefik, Caddy ou Nginx Proxy Manager pour débuter ?"}]
    # post 171 (#3) is a neighbour of the evidence: a link to it is kept
    assert f"[the next reply]({url1[:-2]}/3)" in body["text"]
    assert body["removed"] == []


@pytest.fixture
def scratch(forum_state: Any) -> Iterator[psycopg.Connection[Any]]:
    """A connection whose changes to the forum are undone after the test."""
    conn = psycopg.connect(forum_state.urls.database_url, autocommit=True)
    conn.execute("CREATE TEMP TABLE saved_posts AS SELECT * FROM posts WHERE topic_id = 27")
    conn.execute("CREATE TEMP TABLE saved_topics AS SELECT * FROM topics WHERE id = 27")
    yield conn
    conn.execute("DELETE FROM posts WHERE topic_id = 27")
    conn.execute("INSERT INTO posts SELECT * FROM saved_posts")
    conn.execute("DELETE FROM topics WHERE id = 27")
    conn.execute("INSERT INTO topics SELECT * FROM saved_topics")
    conn.close()


@pytest.mark.parametrize("change", [
    "UPDATE posts SET hidden = true WHERE id = 169",
    "UPDATE posts SET deleted_at = now() WHERE id = 169",
    "UPDATE posts SET user_deleted = true WHERE id = 169",
    "UPDATE posts SET post_type = 4 WHERE id = 169",  # turned into a whisper
    "UPDATE topics SET archetype = 'private_message', category_id = NULL WHERE id = 27",
    "UPDATE topics SET category_id = (SELECT id FROM categories WHERE read_restricted LIMIT 1)"
    " WHERE id = 27",
    "UPDATE topics SET visible = false WHERE id = 27",
    "DELETE FROM posts WHERE id = 169",
])
def test_a_post_no_longer_public_is_dropped_at_that_moment(
    http: Any, auth: dict[str, str], rid: str, scratch: psycopg.Connection[Any], change: str
) -> None:
    text = "Caddy [[1]] and NPM [[2]]; [link](/t/x/27/1)."
    before = post_json(http, auth, {"retrieval_id": rid, "text": text}).json
    assert [c["n"] for c in before["citations"]] == [1, 2]
    scratch.execute(change)  # type: ignore[arg-type]
    after = post_json(http, auth, {"retrieval_id": rid, "text": text}).json
    gone_topic = "topics" in change
    assert [c["n"] for c in after["citations"]] == ([] if gone_topic else [2])
    assert "/27/1" not in after["text"]
    assert any(r["kind"] == "citation" and r["value"] == "[[1]]"
               and "no longer public" in r["reason"] for r in after["removed"])
    assert any(r["kind"] == "link" and r["value"] == "/t/x/27/1" for r in after["removed"])
    allowed = set() if gone_topic else {c["url"] for c in after["citations"]}
    assert audit(after["text"], allowed) == []


def test_a_renamed_topic_is_linked_with_its_new_slug_and_title(
    http: Any, auth: dict[str, str], rid: str, scratch: psycopg.Connection[Any]
) -> None:
    scratch.execute("UPDATE topics SET title = 'Reverse proxies, 2026 edition',"
                    " slug = 'reverse-proxies-2026' WHERE id = 27")
    body = post_json(http, auth, {"retrieval_id": rid, "text": "See [[2]]."}).json
    assert body["citations"][0]["url"] == f"{FORUM}/t/reverse-proxies-2026/27/2"
    link = "[Reverse proxies, 2026 edition](https://forum.example.org/t/reverse-proxies-2026/27/2)"
    assert link in body["text"]


@pytest.mark.parametrize(("locale", "cta"), [
    ("fr", "Retrouvez les discussions complètes sur le forum"),
    ("fr-CA", "Retrouvez les discussions complètes sur le forum"),
    ("en", "Read the full discussions on the forum"),
    (None, "Read the full discussions on the forum"),  # the forum's locale (en here)
])
def test_call_to_action_in_the_retrievals_language(
    http: Any, auth: dict[str, str], forum_state: Any, locale: str | None, cta: str
) -> None:
    url = forum_state.urls.database_url
    rid = store_retrieval(url, evidence_for(url, [169]), locale=locale)
    body = post_json(http, auth, {"retrieval_id": rid, "text": "Voir [[1]]."}).json
    assert cta in body["text"]


def test_a_gated_retrieval_without_evidence(http: Any, auth: dict[str, str],
                                            forum_state: Any) -> None:
    rid = store_retrieval(forum_state.urls.database_url, [], zone="abstain")
    body = post_json(http, auth, {"retrieval_id": rid, "text": "Hello [[1]] <b>hi</b>"}).json
    assert body["citations"] == []
    assert body["text"].startswith("Hello hi")
    assert {r["kind"] for r in body["removed"]} == {"citation", "html"}


def test_openapi_documents_sanitize(http: Any, auth: dict[str, str]) -> None:
    spec = http.get("/v1/openapi.json", headers=auth).json
    op = spec["paths"]["/v1/sanitize"]["post"]
    assert {"200", "404", "413", "422"} <= set(op["responses"])
    schema = spec["components"]["schemas"]["SanitizeResponse"]
    assert set(schema["properties"]) == {"text", "citations", "removed", "outcome"}
