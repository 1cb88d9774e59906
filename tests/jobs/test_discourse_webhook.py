"""POST /v1/discourse/webhook: signed Discourse deliveries become index events (hints), applied
once per event name and body.

Deliveries are built as Discourse builds them (headers of `emit_web_hook_event.rb`, the body
`{"post": {...}}`, `sha256=` + HMAC-SHA256 of the raw body); the jobs are worked by a real RQ
worker (`SimpleWorker.work(burst=True)`) on real Redis and PostgreSQL, and the new post is then
found by `/v1/search`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import itertools
import json
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from pydantic import SecretStr

from jobs import queues
from sidecar.errors import ServiceUnavailable
from sidecar.runtime.bootstrap import backfill_sync
from sidecar.runtime.resources import Resources
from tests.conftest import API_KEY, owner_url
from tests.helpers import add_post, discourse_delivery
from tests.jobs.conftest import public_post_ids, vector_rows, work

SECRET = "a-webhook-secret-of-32-chars-000"
AUTH = {"Authorization": f"Bearer {API_KEY}"}
QUESTION = "How do I descale my espresso machine with citric acid?"
ANSWER = ("Descaling the espresso machine: dissolve 30 g of citric acid in a litre of water, run "
          "half through the group head and the steam wand, wait twenty minutes, then flush with "
          "two full tanks of clean water before pulling a shot.")
_ids = itertools.count(9001)


def with_secret(res: Resources) -> Resources:
    settings = res.settings.model_copy(update={"discourse_webhook_secret": SecretStr(SECRET)})
    return dataclasses.replace(res, settings=settings)


@pytest.fixture
def forum(dummy_res: Resources) -> Iterator[Resources]:
    """The demo forum (the fast DummyEmbedder, nothing embedded yet), webhooks on."""
    yield with_secret(dummy_res)


@pytest.fixture
def api(forum: Resources) -> Any:
    from sidecar.api.app import create_app

    return create_app(forum.settings, forum).test_client()


def deliver(api: Any, event: str, body: dict[str, Any], *, event_id: int | None = None,
            secret: str = SECRET, **options: Any) -> Any:
    """One delivery, with the headers Discourse sends."""
    raw, headers = discourse_delivery(event, body, secret,
                                      next(_ids) if event_id is None else event_id, **options)
    return api.post("/v1/discourse/webhook", data=raw, headers=headers)


def post_payload(post: dict[str, Any], archetype: str = "regular") -> dict[str, Any]:
    """A `WebHookPostSerializer` body (the snapshot: the sidecar reads the database)."""
    return {"post": {"id": post["id"], "topic_id": post["topic_id"], "post_number":
                     post["post_number"], "post_type": 1, "raw": post["raw"], "cooked":
                     post["cooked"], "hidden": False, "user_deleted": False,
                     "topic_archetype": archetype, "category_id": None}}


def search_post_ids(api: Any) -> list[int]:
    resp = api.post("/v1/search", json={"query": QUESTION, "limit": 3, "mode": "semantic",
                                        "link": "semantic"},  # the most similar post
                    headers=AUTH)
    assert resp.status_code == 200, resp.json
    return [r["post"]["id"] for r in resp.json["results"]]


PUBLIC_TOPIC = "SELECT id FROM topics WHERE id = 20"
PM_TOPIC = "SELECT id FROM topics WHERE archetype = 'private_message' ORDER BY id LIMIT 1"
RESTRICTED_TOPIC = ("SELECT t.id FROM topics t JOIN categories c ON c.id = t.category_id"
                    " WHERE c.read_restricted AND t.archetype = 'regular' ORDER BY t.id LIMIT 1")


def test_a_signed_post_created_makes_a_public_post_searchable(demo_res: Resources) -> None:
    from sidecar.api.app import create_app

    backfill_sync(demo_res, 1, progress=False)  # the forum embedded with MiniLM
    forum = with_secret(demo_res)
    api = create_app(forum.settings, forum).test_client()
    post = add_post(owner_url(forum.urls.database_url), PUBLIC_TOPIC, ANSWER)
    assert post["id"] not in search_post_ids(api)
    resp = deliver(api, "post_created", post_payload(post))
    assert resp.status_code == 202, resp.json
    assert resp.json["status"] == "applied" and resp.json["event"] == "post_created"
    assert resp.json["queued_posts"] == 1 and len(resp.json["job_ids"]) == 1
    work(forum)  # a real RQ SimpleWorker, burst
    assert search_post_ids(api)[0] == post["id"]


@pytest.mark.parametrize("topic_sql", [PM_TOPIC, RESTRICTED_TOPIC],
                         ids=["private-message", "restricted-category"])
def test_a_private_post_embeds_nothing(api: Any, forum: Resources, topic_sql: str) -> None:
    before = vector_rows(owner_url(forum.urls.database_url), forum.model.id)
    post = add_post(owner_url(forum.urls.database_url), topic_sql, ANSWER)
    # Even a payload that claims the post is a regular public one: the database decides.
    resp = deliver(api, "post_created", post_payload(post))
    assert resp.status_code == 202
    assert (resp.json["queued_posts"], resp.json["job_ids"]) == (0, [])
    work(forum)
    assert vector_rows(owner_url(forum.urls.database_url), forum.model.id) == before


def test_signatures_are_checked(api: Any, forum: Resources) -> None:
    body = {"post": {"id": 1}}
    for kwargs in ({"secret": "another-secret-of-the-same-size"}, {"signature": ""},
                   {"signature": "sha1=0123"}):
        resp = deliver(api, "post_created", body, **kwargs)
        assert resp.status_code == 401, resp.json
        assert resp.json["error"]["code"] == "unauthorized"
    assert forum.redis.llen(queues.queue(forum.redis, forum.settings, "index").key) == 0
    # Signed with the right secret but tampered with on the way: 401 as well.
    raw = json.dumps(body).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()
    tampered = api.post("/v1/discourse/webhook", data=raw.replace(b"1", b"2"), headers={
        "X-Discourse-Event": "post_created", "X-Discourse-Event-Signature": signature,
        "Content-Type": "application/json"})
    assert tampered.status_code == 401


def test_a_delivery_is_applied_once_across_api_nodes_whatever_its_event_id(
    forum: Resources, api: Any
) -> None:
    from sidecar.api.app import create_app

    other_node = create_app(forum.settings, forum).test_client()
    post = add_post(owner_url(forum.urls.database_url), PUBLIC_TOPIC, ANSWER)
    first = deliver(api, "post_edited", post_payload(post), event_id=4242)
    again = deliver(other_node, "post_edited", post_payload(post), event_id=4242)
    assert first.status_code == 202 and first.json["status"] == "applied"
    assert again.status_code == 200 and again.json["status"] == "duplicate"
    index = queues.queue(forum.redis, forum.settings, "index")
    assert index.count == 1
    # The event id is not signed: the same body under another id is the same delivery.
    renumbered = deliver(api, "post_edited", post_payload(post), event_id=4243)
    assert renumbered.status_code == 200 and renumbered.json["status"] == "duplicate"
    # Another body (the post edited again) is another delivery.
    edited = deliver(api, "post_edited", post_payload({**post, "raw": post["raw"] + " Edit."}),
                     event_id=4244)
    assert edited.status_code == 202 and edited.json["status"] == "applied"


def found_by_meaning(api: Any, forum: Resources, post: dict[str, Any]) -> bool:
    """Whether a semantic search for exactly the text embedded for ``post`` finds its topic.

    Only that post has a vector here (the demo forum is not embedded): without it the search
    finds nothing at all.
    """
    from sidecar.ingest.indexing import Indexer

    [text] = Indexer(forum.db, forum.embedder, forum.model).prepare([post["id"]]).texts
    resp = api.post("/v1/search", json={"query": text[:1500], "limit": 1, "mode": "semantic"},
                    headers=AUTH)
    assert resp.status_code == 200, resp.json
    return [r["topic_id"] for r in resp.json["results"]] == [post["topic_id"]]


def test_a_replayed_body_under_another_event_name_or_id_changes_nothing(
    api: Any, forum: Resources
) -> None:
    """Fault: someone who saw one signed delivery sends its body again, under every post event
    name and new event ids. The post stays searchable and nothing new is queued."""
    url = owner_url(forum.urls.database_url)
    post = add_post(url, PUBLIC_TOPIC, ANSWER)
    assert vector_rows(url, forum.model.id) == []
    with psycopg.connect(url) as conn:
        # A forum last changed an hour ago (the demo was loaded just now: a change less than
        # indexing.CHECK_MARGIN before a check still counts as newer than it, on purpose).
        for table in ("categories", "topics", "posts"):
            conn.execute(f"UPDATE {table} SET updated_at = updated_at - interval '1 hour'")
    body = post_payload(post)
    created = deliver(api, "post_created", body, event_id=500)
    assert created.status_code == 202 and created.json["queued_posts"] == 1
    work(forum)
    assert found_by_meaning(api, forum, post)
    vectors = vector_rows(url, forum.model.id)
    index = queues.queue(forum.redis, forum.settings, "index")
    queued = (index.count, index.finished_job_registry.count, index.failed_job_registry.count)
    replays = [("post_destroyed", 501), ("post_destroyed", 502), ("post_created", 503),
               ("post_edited", 504), ("post_recovered", 505), ("post_destroyed", 506)]
    for name, event_id in replays:
        resp = deliver(api, name, body, event_id=event_id)
        assert resp.status_code in (200, 202), (name, resp.json)
        assert not resp.json.get("vectors_removed") and not resp.json.get("job_ids"), resp.json
        assert not resp.json.get("queued_posts"), (name, resp.json)
    work(forum)
    assert (index.count, index.finished_job_registry.count,
            index.failed_job_registry.count) == queued
    assert vector_rows(url, forum.model.id) == vectors
    assert found_by_meaning(api, forum, post)
    # A topic or category body replayed under other names re-indexes nothing either (once the
    # first delivery was worked).
    for kind, ident, names in (("topic", 20, ("topic_edited", "topic_recovered",
                                              "topic_visible_status_updated")),
                               ("category", 1, ("category_updated", "category_created"))):
        first = deliver(api, names[0], {kind: {"id": ident}})
        assert first.status_code == 202 and first.json["job_ids"], first.json
        work(forum)
        for name in (*names[1:], f"{kind}_made_up_1", f"{kind}_made_up_2"):
            resp = deliver(api, name, {kind: {"id": ident}})
            # Every topic_* name stands for one index event: a duplicate of the first.
            assert resp.status_code == 200 and resp.json["status"] == "duplicate", resp.json
        # The same scope in another body (a real change would differ): applied, nothing to do.
        other = deliver(api, names[-1], {kind: {"id": ident, "updated_at": "later"}})
        assert other.status_code == 202 and other.json["job_ids"] == [], other.json
        assert other.json["vectors_removed"] == 0
    assert index.count == 0


def test_a_post_goes_only_when_the_database_says_so(api: Any, forum: Resources) -> None:
    url = owner_url(forum.urls.database_url)
    post = add_post(url, PUBLIC_TOPIC, ANSWER)
    assert deliver(api, "post_created", post_payload(post)).status_code == 202
    work(forum)
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE posts SET deleted_at = now() AT TIME ZONE 'utc' WHERE id = %s",
                     (post["id"],))
    gone = deliver(api, "post_destroyed", post_payload(post))
    assert gone.status_code == 202 and gone.json["vectors_removed"] == 1
    assert post["id"] not in {pid for pid, _ in vector_rows(url, forum.model.id)}


def _embedded_post(api: Any, forum: Resources) -> dict[str, Any]:
    post = add_post(owner_url(forum.urls.database_url), PUBLIC_TOPIC, ANSWER)
    assert deliver(api, "post_created", post_payload(post)).status_code == 202
    work(forum)
    assert post["id"] in {pid for pid, _ in vector_rows(forum.urls.database_url, forum.model.id)}
    return post


def _delete(url: str, post_id: int) -> None:
    with psycopg.connect(url) as conn:
        conn.execute("UPDATE posts SET deleted_at = now() AT TIME ZONE 'utc' WHERE id = %s",
                     (post_id,))


def test_a_removal_delivered_before_the_forum_committed_it_is_not_lost(
    api: Any, forum: Resources
) -> None:
    """Fault (the review's): deliver, then delete, then redeliver. A post_destroyed that reached
    the sidecar before the forum's commit (or a replica's) changed nothing, yet was remembered:
    Discourse's redelivery was a "duplicate" and the vectors stayed at rest for good."""
    url = owner_url(forum.urls.database_url)  # the forum writes; the sidecar only reads
    post = _embedded_post(api, forum)
    early = deliver(api, "post_destroyed", post_payload(post), event_id=880)
    assert early.status_code == 202 and early.json["vectors_removed"] == 0  # still public
    _delete(url, post["id"])  # the forum's transaction commits now
    again = deliver(api, "post_destroyed", post_payload(post), event_id=880)
    assert again.status_code == 202 and again.json["status"] == "applied", again.json
    assert again.json["vectors_removed"] == 1
    assert post["id"] not in {pid for pid, _ in vector_rows(url, forum.model.id)}
    # Applied now: the next redelivery is the duplicate.
    last = deliver(api, "post_destroyed", post_payload(post), event_id=880)
    assert last.status_code == 200 and last.json["status"] == "duplicate"


def test_a_hint_that_changed_nothing_is_looked_at_again_later(forum: Resources) -> None:
    """No redelivery at all: the hint is re-checked by the worker after
    SIDECAR_DISCOURSE_RECHECK_S, and replays of it keep one re-check waiting, not one each."""
    from sidecar.api.app import create_app

    quick = dataclasses.replace(forum, settings=forum.settings.model_copy(
        update={"discourse_recheck_s": 1}))
    api = create_app(quick.settings, quick).test_client()
    url = owner_url(forum.urls.database_url)  # the forum writes; the sidecar only reads
    post = _embedded_post(api, quick)
    index = queues.queue(forum.redis, forum.settings, "index")
    for event_id in (900, 901, 902):  # Discourse's delivery, then replays of its body
        early = deliver(api, "post_destroyed", post_payload(post), event_id=event_id)
        assert early.json["vectors_removed"] == 0 and early.json["recheck_in_s"] == 1
    assert index.scheduled_job_registry.count == 1
    _delete(url, post["id"])
    time.sleep(1.2)
    work(quick)  # the re-check is due: the worker's scheduler queues it, the worker applies it
    assert post["id"] not in {pid for pid, _ in vector_rows(url, forum.model.id)}
    assert index.failed_job_registry.count == 0


def test_a_delivery_that_failed_is_not_taken_for_a_duplicate(
    api: Any, forum: Resources, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sidecar.api import routes_discourse

    post = add_post(owner_url(forum.urls.database_url), PUBLIC_TOPIC, ANSWER)

    def down(*args: Any, **kwargs: Any) -> Any:
        raise ServiceUnavailable("the database is not reachable right now")

    monkeypatch.setattr(routes_discourse, "apply_event", down)
    failed = deliver(api, "post_created", post_payload(post), event_id=777)
    assert failed.status_code == 503  # Discourse retries it later, with the same id
    monkeypatch.undo()
    retried = deliver(api, "post_created", post_payload(post), event_id=777)
    assert retried.status_code == 202 and retried.json["queued_posts"] == 1


def test_events_map_to_the_index_events(api: Any, forum: Resources) -> None:
    from sidecar.ingest.indexing import Indexer

    gone = min(public_post_ids(owner_url(forum.urls.database_url)))
    assert Indexer(forum.db, forum.embedder, forum.model).embed_posts([gone]).embedded == 1
    # what the database says counts
    with psycopg.connect(owner_url(forum.urls.database_url)) as conn:
        conn.execute("UPDATE posts SET hidden = true WHERE id = %s", (gone,))
    destroyed = deliver(api, "post_destroyed", {"post": {"id": gone}})
    assert destroyed.json["event"] == "post_deleted" and destroyed.json["vectors_removed"] == 1
    for name, kind, event in (("topic_edited", "topic", "topic_changed"),
                              ("topic_visible_status_updated", "topic", "topic_changed"),
                              ("topic_destroyed", "topic", "topic_changed"),
                              ("category_updated", "category", "category_changed"),
                              ("post_recovered", "post", "post_recovered")):
        # Bodies differ, as Discourse's do (the same body under another topic_* name would be
        # a duplicate of the same topic_changed).
        resp = deliver(api, name, {kind: {"id": 20 if kind != "category" else 1, "n": name}})
        assert resp.status_code == 202 and resp.json["event"] == event, (name, resp.json)
    ping = deliver(api, "ping", {"ping": "OK"})
    assert ping.status_code == 200 and ping.json["status"] == "pong"
    for name in ("user_created", "tag_created", "post_liked", "solved_accepted"):
        ignored = deliver(api, name, {"user": {"id": 3}})
        assert ignored.status_code == 200 and ignored.json["status"] == "ignored", name


def test_bad_deliveries_are_json_4xx(api: Any) -> None:
    assert deliver(api, "post_created", {"post": {}}).status_code == 422
    assert deliver(api, "post_created", {"post": {"id": "12"}}).status_code == 422
    assert deliver(api, "topic_created", {"post": {"id": 12}}).status_code == 422
    form = deliver(api, "post_created", {"post": {"id": 1}},
                   content_type="application/x-www-form-urlencoded")
    assert form.status_code == 415 and "application/json" in form.json["error"]["message"]
    raw = b"[not json"
    signature = "sha256=" + hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()
    broken = api.post("/v1/discourse/webhook", data=raw, headers={
        "X-Discourse-Event": "post_created", "X-Discourse-Event-Signature": signature,
        "Content-Type": "application/json"})
    assert broken.status_code == 400 and broken.json["error"]["code"] == "bad_request"


def test_the_route_is_off_without_a_secret(demo_res: Resources) -> None:
    from sidecar.api.app import create_app

    client = create_app(demo_res.settings, demo_res).test_client()
    resp = deliver(client, "ping", {"ping": "OK"})
    assert resp.status_code == 404
    assert "SIDECAR_DISCOURSE_WEBHOOK_SECRET" in resp.json["error"]["message"]
    spec = client.get("/v1/openapi.json", headers=AUTH).json
    operation = spec["paths"]["/v1/discourse/webhook"]["post"]
    assert operation["security"] == [{"discourse": []}]
    assert {"202", "401", "404"} <= set(operation["responses"])


def test_a_short_secret_is_refused() -> None:
    from pydantic import ValidationError

    from sidecar.config.settings import Settings

    with pytest.raises(ValidationError, match="at least 12 characters"):
        Settings(discourse_webhook_secret=SecretStr("short"))


def test_the_webhook_has_its_own_body_limit(api: Any, forum: Resources) -> None:
    from sidecar.api.app import create_app

    post = add_post(owner_url(forum.urls.database_url), PUBLIC_TOPIC, ANSWER)
    payload = post_payload(post)
    payload["post"]["cooked"] = "<p>" + "A long post. " * 40_000 + "</p>"  # ~520 KB
    assert forum.settings.max_request_bytes < 600_000 < forum.settings.discourse_webhook_max_bytes
    resp = deliver(api, "post_edited", payload)
    assert resp.status_code == 202, resp.json
    # The other routes keep SIDECAR_MAX_REQUEST_BYTES.
    search = api.post("/v1/search", json={"query": "x", "padding": "y" * 600_000}, headers=AUTH)
    assert search.status_code == 413
    # Over the webhook's own limit: a JSON 413.
    tight = forum.settings.model_copy(update={"discourse_webhook_max_bytes": 256 * 1024})
    small = create_app(tight, dataclasses.replace(forum, settings=tight)).test_client()
    over = deliver(small, "post_edited", payload)
    assert over.status_code == 413 and over.json["error"]["code"] == "request_entity_too_large"
