"""POST /v1/index/events and the /v1/admin/backfill routes, over HTTP, real Redis and PostgreSQL."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from sidecar.runtime.resources import Resources
from tests.conftest import API_KEY, owner_url
from tests.jobs.conftest import public_post_ids, run_record, vector_rows, work

AUTH = {"Authorization": f"Bearer {API_KEY}"}



@pytest.fixture
def api(indexed: Resources) -> Any:
    from sidecar.api.app import create_app

    return create_app(indexed.settings, indexed).test_client()


def _digests(res: Resources) -> dict[int, str]:
    return dict(vector_rows(owner_url(res.urls.database_url), res.model.id))


def _sql(res: Resources, query: str, *params: Any) -> list[Any]:
    with psycopg.connect(owner_url(res.urls.database_url)) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def _event(api: Any, event: str, ids: list[int]) -> dict[str, Any]:
    resp = api.post("/v1/index/events", json={"event": event, "ids": ids}, headers=AUTH)
    assert resp.status_code == 202, resp.json
    body: dict[str, Any] = resp.json
    return body


def _topic_posts(res: Resources, topic_id: int) -> set[int]:
    return {r[0] for r in _sql(res, "SELECT id FROM posts WHERE topic_id = %s", topic_id)}


def test_post_edited_re_embeds_exactly_that_post(api: Any, indexed: Resources) -> None:
    before = _digests(indexed)
    post = sorted(before)[len(before) // 2]
    _sql(indexed, "UPDATE posts SET cooked = cooked || '<p>EDIT: it was the PSU.</p>',"
                  " updated_at = now() AT TIME ZONE 'utc' WHERE id = %s", post)
    body = _event(api, "post_edited", [post, post])
    assert body["queued_posts"] == 1 and len(body["job_ids"]) == 1 and body["ids"] == 1
    assert _digests(indexed) == before  # queued, not done yet
    work(indexed)
    after = _digests(indexed)
    assert {p for p in after if after[p] != before[p]} == {post}
    assert set(after) == set(before)


def test_deleted_and_hidden_posts_lose_their_vectors_before_the_answer(
    api: Any, indexed: Resources,
) -> None:
    deleted, hidden = sorted(_digests(indexed))[:2]
    _sql(indexed, "UPDATE posts SET deleted_at = now() AT TIME ZONE 'utc' WHERE id = %s",
         deleted)
    assert _event(api, "post_deleted", [deleted])["vectors_removed"] == 1
    # post_hidden is trusted as is: the vectors go even before the forum row says so.
    assert _event(api, "post_hidden", [hidden])["vectors_removed"] == 1
    assert not {deleted, hidden} & set(_digests(indexed))
    work(indexed)
    assert not {deleted, hidden} & set(_digests(indexed))

    # Recovered: back in the index.
    _sql(indexed, "UPDATE posts SET deleted_at = NULL WHERE id = %s", deleted)
    body = _event(api, "post_recovered", [deleted])
    assert body["queued_posts"] == 1
    work(indexed)
    assert deleted in _digests(indexed)


def test_rows_of_discourse_ai_models_are_left_alone(api: Any, indexed: Resources) -> None:
    """In a shared ai_posts_embeddings, discourse-ai's own rows are not the sidecar's."""
    post = sorted(_digests(indexed))[3]
    _sql(indexed, "INSERT INTO ai_posts_embeddings (post_id, model_id, model_version,"
                  " strategy_id, strategy_version, digest, embeddings, created_at, updated_at)"
                  " SELECT post_id, 7, 1, 1, 1, digest, embeddings, created_at, updated_at"
                  " FROM ai_posts_embeddings WHERE post_id = %s", post)
    assert _event(api, "post_deleted", [post])["vectors_removed"] == 1
    assert _sql(indexed, "SELECT model_id FROM ai_posts_embeddings WHERE post_id = %s",
                post) == [(7,)]


def test_an_edit_that_makes_a_post_private_removes_it_at_once(
    api: Any, indexed: Resources,
) -> None:
    post = sorted(_digests(indexed))[5]
    _sql(indexed, "UPDATE posts SET post_type = 4 WHERE id = %s", post)  # now a whisper
    body = _event(api, "post_edited", [post])
    assert (body["vectors_removed"], body["queued_posts"], body["job_ids"]) == (1, 0, [])
    assert post not in _digests(indexed)


def test_topic_moved_into_a_restricted_category_loses_every_vector_at_once(
    api: Any, indexed: Resources,
) -> None:
    restricted = _sql(indexed, "SELECT id FROM categories WHERE read_restricted LIMIT 1")
    assert restricted, "the demo has a read-restricted category"
    digests = _digests(indexed)
    topic = _sql(indexed, "SELECT topic_id FROM posts WHERE id = %s", min(digests))[0][0]
    posts = _topic_posts(indexed, topic) & set(digests)
    assert len(posts) > 1
    _sql(indexed, "UPDATE topics SET category_id = %s WHERE id = %s", restricted[0][0], topic)
    body = _event(api, "topic_changed", [topic])
    assert body["vectors_removed"] == len(posts)
    assert not posts & set(_digests(indexed))
    work(indexed)
    assert not posts & set(_digests(indexed))


def test_a_title_change_re_embeds_every_post_of_the_topic_only(
    api: Any, indexed: Resources,
) -> None:
    before = _digests(indexed)
    topic = _sql(indexed, "SELECT topic_id FROM posts WHERE id = %s", max(before))[0][0]
    posts = _topic_posts(indexed, topic) & set(before)
    _sql(indexed, "UPDATE topics SET title = title || ' (solved)',"
                  " updated_at = now() AT TIME ZONE 'utc' WHERE id = %s", topic)
    body = _event(api, "topic_changed", [topic])
    assert body["vectors_removed"] == 0 and len(body["job_ids"]) == 1
    work(indexed)
    after = _digests(indexed)
    assert {p for p in after if after[p] != before[p]} == posts


def test_category_rename_and_restriction(api: Any, indexed: Resources) -> None:
    before = _digests(indexed)
    category = _sql(indexed, "SELECT t.category_id, count(*) FROM posts p JOIN topics t"
                             " ON t.id = p.topic_id WHERE p.id = ANY(%s) GROUP BY 1"
                             " ORDER BY 2 DESC LIMIT 1", sorted(before))[0][0]
    in_category = {r[0] for r in _sql(
        indexed, "SELECT p.id FROM posts p JOIN topics t ON t.id = p.topic_id"
                 " JOIN categories c ON c.id = t.category_id"
                 " WHERE c.id = %s OR c.parent_category_id = %s", category, category)}
    in_category &= set(before)
    _sql(indexed, "UPDATE categories SET name = name || ' & more' WHERE id = %s", category)
    _event(api, "category_changed", [category])
    work(indexed)
    after = _digests(indexed)
    assert {p for p in after if after[p] != before[p]} == in_category

    _sql(indexed, "UPDATE categories SET read_restricted = true WHERE id = %s", category)
    body = _event(api, "category_changed", [category])
    assert body["vectors_removed"] == len(in_category)
    assert not in_category & set(_digests(indexed))
    assert set(_digests(indexed)) == public_post_ids(owner_url(indexed.urls.database_url))


@pytest.mark.parametrize(("body", "status"), [
    ({"event": "post_liked", "ids": [1]}, 422),
    ({"event": "post_edited", "ids": []}, 422),
    ({"event": "post_edited", "ids": [0]}, 422),
    ({"event": "post_edited", "ids": [-3]}, 422),
    ({"event": "post_edited", "ids": ["12"]}, 422),
    ({"event": "post_edited", "ids": [2**31]}, 422),
    ({"event": "post_edited", "ids": list(range(1, 1002))}, 422),
    ({"event": "post_edited", "ids": [1], "force": True}, 422),
    ({"event": "post_edited"}, 422),
    ([{"event": "post_edited", "ids": [1]}], 422),
])
def test_bad_events_get_a_clear_4xx(api: Any, body: Any, status: int) -> None:
    resp = api.post("/v1/index/events", json=body, headers=AUTH)
    assert resp.status_code == status
    assert resp.json["error"]["code"] == "invalid_input"


def test_events_need_json_and_the_key(api: Any) -> None:
    resp = api.post("/v1/index/events", data="event=post_edited", headers=AUTH)
    assert resp.status_code == 400 and resp.json["error"]["code"] == "bad_request"
    resp = api.post("/v1/index/events", json={"event": "post_deleted", "ids": [1]})
    assert resp.status_code == 401


def test_admin_backfill_runs_start_pause_resume_stop(api: Any, indexed: Resources) -> None:
    listed = api.get("/v1/admin/backfill", headers=AUTH)
    assert listed.status_code == 200
    first = listed.json["runs"][0]
    assert (first["status"], first["stop_reason"], first["remaining"]) == ("finished", "done", 0)
    assert first["done"] == first["budgeted"] > 0
    assert "sidecar-backfill" in listed.json["queues"]["queues"]

    started = api.post("/v1/admin/backfill", json={"budget": 10, "until": "23:59"},
                       headers=AUTH)
    assert started.status_code == 202, started.json
    run = started.json["run"]
    assert run["status"] == "planning" and run["budget"] == 10 and run["deadline"]
    again = api.post("/v1/admin/backfill", json={}, headers=AUTH)
    assert again.status_code == 409 and f"run #{run['id']}" in again.json["error"]["message"]

    base = f"/v1/admin/backfill/{run['id']}"
    paused = api.post(f"{base}/pause", headers=AUTH)
    assert paused.status_code == 200 and paused.json["run"]["status"] == "paused"
    work(indexed)  # the planning job finds the run paused and leaves it be
    assert run_record(indexed, run["id"]).status == "paused"
    resumed = api.post(f"{base}/resume", headers=AUTH)
    assert resumed.status_code == 200 and resumed.json["run"]["status"] == "planning"
    stopped = api.post(f"{base}/stop", headers=AUTH)
    assert stopped.json["run"]["status"] == "finished"
    assert stopped.json["run"]["stop_reason"] == "cancelled"
    assert api.post(f"{base}/stop", headers=AUTH).status_code == 409
    work(indexed)
    assert run_record(indexed, run["id"]).budgeted == 0  # stopped before it was planned

    one = api.get(f"/v1/admin/backfill?run={run['id']}", headers=AUTH)
    assert [r["id"] for r in one.json["runs"]] == [run["id"]]


@pytest.mark.parametrize(("method", "path", "body", "status"), [
    ("get", "/v1/admin/backfill?run=99999", None, 404),
    ("get", "/v1/admin/backfill?limit=0", None, 422),
    ("get", "/v1/admin/backfill?limit=ten", None, 422),
    ("get", "/v1/admin/backfill?color=red", None, 422),
    ("post", "/v1/admin/backfill/99999/pause", None, 404),
    ("post", "/v1/admin/backfill/1/explode", None, 404),
    ("post", "/v1/admin/backfill", {"strategy": 3}, 422),
    ("post", "/v1/admin/backfill", {"budget": 0}, 422),
    ("post", "/v1/admin/backfill", {"until": "25:99"}, 422),
    ("post", "/v1/admin/backfill", {"until": "tonight"}, 422),
])
def test_admin_bad_requests(api: Any, method: str, path: str, body: Any, status: int) -> None:
    resp = getattr(api, method)(path, json=body, headers=AUTH)
    assert resp.status_code == status, resp.json
    assert "error" in resp.json


def test_openapi_describes_the_routes(api: Any) -> None:
    spec = api.get("/v1/openapi.json", headers=AUTH).json
    assert "202" in spec["paths"]["/v1/index/events"]["post"]["responses"]
    assert {"get", "post"} <= set(spec["paths"]["/v1/admin/backfill"])
    assert "/v1/admin/backfill/{run_id}/{action}" in spec["paths"]
