"""The related-topics cache in Redis: index events drop what they touch, and what is shown
never depends on it (a topic made private leaves every list at once, cached or not)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest

from sidecar.related.cache import forum_cache, ttl_for
from sidecar.runtime.resources import Resources
from tests.conftest import API_KEY, owner_url
from tests.jobs.conftest import work

AUTH = {"Authorization": f"Bearer {API_KEY}"}



@pytest.fixture
def api(indexed: Resources) -> Any:
    from sidecar.api.app import create_app

    return create_app(indexed.settings, indexed).test_client()


def _sql(res: Resources, query: str, *params: Any) -> list[Any]:
    with psycopg.connect(owner_url(res.urls.database_url)) as conn:
        cur = conn.execute(query, params)
        return cur.fetchall() if cur.description else []


def _related(api: Any, topic: int, **params: Any) -> dict[str, Any]:
    resp = api.get(f"/v1/topics/{topic}/related", query_string={"limit": 10, **params},
                   headers=AUTH)
    assert resp.status_code == 200, resp.json
    body: dict[str, Any] = resp.json
    return body


def _event(api: Any, event: str, ids: list[int]) -> None:
    resp = api.post("/v1/index/events", json={"event": event, "ids": ids}, headers=AUTH)
    assert resp.status_code == 202, resp.json


def _trace(body: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """Each step of the answer's trace, without its timing."""
    return [(s["step"], s["status"], s.get("detail", {})) for s in body["trace"]]


def _listed(body: dict[str, Any]) -> list[int]:
    return [r["topic_id"] for r in body["results"]]


def test_the_cache_lives_as_long_as_discourse_ai_keeps_it_by_topic_age() -> None:
    now = datetime(2026, 12, 1, 12, 0)
    week = 7 * 24 * 3600
    assert ttl_for(now - timedelta(hours=1), now, week) == 15 * 60
    assert ttl_for(now - timedelta(days=1), now, week) == 3600
    assert ttl_for(now - timedelta(days=10), now, week) == 12 * 3600
    assert ttl_for(now - timedelta(days=400), now, week) == week
    assert ttl_for(now - timedelta(days=400), now, 600) == 600  # the setting caps it
    assert ttl_for(now - timedelta(days=400), now, 0) == 0


def test_an_event_drops_the_topic_and_every_list_that_holds_it(
    api: Any, indexed: Resources,
) -> None:
    source, other = 9, 2
    first = _related(api, source)
    assert first["cache"] == "miss" and _related(api, source)["cache"] == "hit"
    listed = _listed(first)[0]
    assert _related(api, other)["cache"] == "miss"
    assert _related(api, listed)["cache"] == "miss"  # its own list, cached too
    # An edit of a post of a listed topic drops the lists that hold it, and its own.
    post = _sql(indexed, "SELECT id FROM posts WHERE topic_id = %s ORDER BY post_number"
                         " LIMIT 1", listed)[0][0]
    _event(api, "post_edited", [post])
    assert _related(api, source)["cache"] == "miss"
    assert _related(api, listed)["cache"] == "miss"
    if listed not in _listed(_related(api, other)):
        assert _related(api, other)["cache"] == "hit"  # untouched lists stay
    # topic_changed on the source drops its own list.
    _event(api, "topic_changed", [source])
    assert _related(api, source)["cache"] == "miss"
    # A category event drops every list at once.
    _related(api, other)
    assert _related(api, other)["cache"] == "hit"
    _event(api, "category_changed", [1])
    assert _related(api, other)["cache"] == "miss"
    assert _related(api, other)["cache"] == "hit"


def test_the_worker_drops_lists_again_once_it_has_re_embedded(
    api: Any, indexed: Resources,
) -> None:
    source = 9
    listed = _listed(_related(api, source))[0]
    post = _sql(indexed, "SELECT id FROM posts WHERE topic_id = %s ORDER BY post_number"
                         " LIMIT 1", listed)[0][0]
    _sql(indexed, "UPDATE posts SET cooked = cooked || '<p>EDIT: solved.</p>',"
                  " updated_at = now() AT TIME ZONE 'utc' WHERE id = %s", post)
    _event(api, "post_edited", [post])
    assert _related(api, source)["cache"] == "miss"  # ranked again before the worker ran
    work(indexed)
    assert _related(api, source)["cache"] == "miss"  # and again after it re-embedded


def test_a_topic_made_private_leaves_every_list_at_once_even_without_an_event(
    api: Any, indexed: Resources,
) -> None:
    source = 9
    body = _related(api, source)
    gone = _listed(body)[0]
    hit = _related(api, source)
    assert hit["cache"] == "hit"
    restricted = _sql(indexed, "SELECT id FROM categories WHERE read_restricted LIMIT 1")[0][0]
    _sql(indexed, "UPDATE topics SET category_id = %s WHERE id = %s", restricted, gone)
    # No event yet: the cached list still ranks it, the answer does not show it.
    after = _related(api, source)
    assert after["cache"] == "hit" and gone not in _listed(after)
    # Nor does the trace tell that a listed topic went private (it used to count it).
    assert _trace(after) == _trace(hit)
    hydrate = {step: (status, detail) for step, status, detail in _trace(after)}["hydrate"]
    assert hydrate == ("done", {"results": 10, "left_out": {"closed": 0, "archived": 0}})
    # The next cached topic fills the page.
    assert _listed(after)[:-1] == [t for t in _listed(body) if t != gone]
    assert len(_listed(after)) == len(_listed(body))
    # And its own related list is now the 404 of a missing topic, cached or not.
    resp = api.get(f"/v1/topics/{gone}/related", headers=AUTH)
    missing = api.get("/v1/topics/999999/related", headers=AUTH)
    assert (resp.status_code, resp.json) == (missing.status_code, missing.json) == (
        404, {"error": {"code": "not_found", "message": "no public topic with this id"}})


def test_archived_topics_can_be_left_out(api: Any, indexed: Resources) -> None:
    source = 9
    archived = _listed(_related(api, source))[:2]
    _sql(indexed, "UPDATE topics SET archived = true WHERE id = ANY(%s)", archived)
    kept = _related(api, source)
    assert [r["archived"] for r in kept["results"][:2]] == [True, True]
    left = _related(api, source, archived="false")
    assert not set(archived) & set(_listed(left))
    assert left["results"] and not any(r["archived"] for r in left["results"])


def test_a_cache_of_another_forum_in_the_same_redis_is_never_read(
    indexed: Resources,
) -> None:
    cache = forum_cache(indexed.redis, indexed.settings, indexed.db)
    other = type(cache)(indexed.redis, indexed.settings.queue_prefix, "another-forum",
                        cache.longest_s)
    assert cache.key(9) != other.key(9)


def test_no_cache_when_the_setting_is_0(indexed: Resources) -> None:
    from dataclasses import replace

    from sidecar.api.app import create_app

    settings = indexed.settings.model_copy(update={"related_cache_ttl_s": 0})
    client = create_app(settings, replace(indexed, settings=settings)).test_client()
    assert [_related(client, 9)["cache"] for _ in range(2)] == ["off", "off"]
