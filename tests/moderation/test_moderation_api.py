"""The moderation JSON API: auth, list filters, detail, labels, calibration."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg
import pytest

from tests.conftest import API_KEY, owner_url
from tests.moderation.conftest import BI, CE, MODERATOR_KEY, add_retrieval

LIST = "/v1/moderation/retrievals"
REASON = ("cross-encoder score -1.5 in [-2, 0): cautious (calibrated on 300 of this forum's "
          "own questions (2026-12-02))")


def test_disabled_without_a_moderator_key(disabled_app: Any) -> None:
    client = disabled_app.test_client()
    resp = client.get(LIST, headers={"Authorization": f"Bearer {MODERATOR_KEY}"})
    assert resp.status_code == 503
    assert "SIDECAR_MODERATOR_KEY" in resp.json["error"]["message"]


@pytest.mark.parametrize("header", [None, "Bearer wrong", f"Bearer {API_KEY}",
                                    f"Basic {MODERATOR_KEY}"])
def test_needs_the_moderator_key(mod_client: Any, header: str | None) -> None:
    headers = {"Authorization": header} if header else {}
    for method, url in (("get", LIST), ("get", "/v1/moderation/calibration"),
                        ("post", f"{LIST}/00000000-0000-0000-0000-000000000000/label")):
        resp = getattr(mod_client, method)(url, headers=headers)
        assert resp.status_code == 401, (url, resp.json)
        assert resp.json["error"]["code"] == "unauthorized"


def test_the_bearer_scheme_is_case_insensitive(mod_client: Any) -> None:
    for scheme in ("Bearer", "bearer", "BEARER"):  # RFC 7235 §2.1
        resp = mod_client.get(LIST, headers={"Authorization": f"{scheme} {MODERATOR_KEY}"})
        assert resp.status_code == 200, scheme


def test_repeated_wrong_keys_are_throttled(mod_client: Any, api_auth: dict[str, str]) -> None:
    statuses = [mod_client.get(LIST, headers={"Authorization": "Bearer nope"}).status_code
                for _ in range(12)]
    assert statuses[:10] == [401] * 10
    assert statuses[10:] == [429, 429]
    # past its limit the client is refused before its key is compared, the right one too
    assert mod_client.get(LIST, headers=api_auth).status_code == 429


def test_list_shows_abstain_and_cautious_newest_first(
    mod_client: Any, api_auth: dict[str, str], clean_retrievals: str
) -> None:
    now = datetime.now(UTC)
    old = add_retrieval(clean_retrievals, zone="abstain", score=-6.0,
                        created_at=now - timedelta(days=3))
    new = add_retrieval(clean_retrievals, zone="cautious", score=-2.0,
                        created_at=now - timedelta(hours=1))
    add_retrieval(clean_retrievals, zone="normal", score=3.0)
    gated = add_retrieval(clean_retrievals, zone="abstain", score=None, gate_reason="greeting",
                          created_at=now - timedelta(days=1))
    body = mod_client.get(LIST, headers=api_auth).json
    assert [i["id"] for i in body["items"]] == [new, gated, old]
    assert body["total"] == 3 and body["pages"] == 1
    item = body["items"][1]
    assert item["gate_reason"] == "greeting" and item["top_score"] is None
    assert item["scorer"] == "none" and item["label"] is None


def test_filters(mod_client: Any, api_auth: dict[str, str], clean_retrievals: str) -> None:
    now = datetime.now(UTC)
    a = add_retrieval(clean_retrievals, zone="abstain", score=-6.0, query="zfs scrub errors",
                      created_at=now - timedelta(days=10))
    b = add_retrieval(clean_retrievals, zone="cautious", score=0.4, scorer=BI,
                      query="wireguard cgnat relay")
    c = add_retrieval(clean_retrievals, zone="abstain", score=-5.0, query="100% uptime_for_free",
                      conversation=[{"role": "user", "content": "my NAS and ZFS?"},
                                    {"role": "assistant", "content": "which pool?"},
                                    {"role": "user", "content": "the second one"}])
    mod_client.post(f"{LIST}/{a}/label", headers=api_auth,
                    json={"label": "correct_abstention"})

    def ids(**params: str) -> list[str]:
        resp = mod_client.get(LIST, headers=api_auth, query_string=params)
        assert resp.status_code == 200, resp.json
        return sorted(i["id"] for i in resp.json["items"])

    assert ids(zone="abstain") == sorted([a, c])
    assert ids(zone="cautious") == [b]
    assert ids(labelled="yes") == [a]
    assert ids(labelled="no") == sorted([b, c])
    assert ids(label="correct_abstention") == [a]
    assert ids(label="wrong_evidence") == []
    assert ids(scorer=BI) == [b]
    assert ids(scorer=CE) == sorted([a, c])
    today = now.date().isoformat()
    assert ids(**{"from": today}) == sorted([b, c])
    assert ids(to=(now - timedelta(days=5)).date().isoformat()) == [a]
    assert ids(q="ZFS") == sorted([a, c])  # query of a, conversation of c
    assert ids(q="100%") == [c]  # LIKE wildcards are literal
    assert ids(q="_for_") == [c]
    assert ids(q="%") == [c]
    assert ids(zone="", q="") == sorted([a, b, c])  # empty form fields are absent


@pytest.mark.parametrize("params", [
    {"zone": "nowhere"}, {"outcome": "great"}, {"outcome": "ANSWERED"}, {"labelled": "maybe"},
    {"label": "nice"}, {"from": "yesterday"},
    {"from": "2026-05-02", "to": "2026-05-01"}, {"page": "0"}, {"per_page": "101"},
    {"page": "x"}, {"sort": "asc"}, {"q": "x" * 201},
])
def test_bad_filters_are_422(mod_client: Any, api_auth: dict[str, str],
                             params: dict[str, str]) -> None:
    resp = mod_client.get(LIST, headers=api_auth, query_string=params)
    assert resp.status_code == 422, resp.json
    assert resp.json["error"]["code"] == "invalid_input"


def test_pagination(mod_client: Any, api_auth: dict[str, str], clean_retrievals: str) -> None:
    now = datetime.now(UTC)
    made = [add_retrieval(clean_retrievals, zone="abstain", score=-5.0 - i,
                          created_at=now - timedelta(minutes=i)) for i in range(7)]
    pages = [mod_client.get(LIST, headers=api_auth,
                            query_string={"per_page": "3", "page": str(p)}).json
             for p in (1, 2, 3, 4)]
    assert [len(p["items"]) for p in pages] == [3, 3, 1, 0]
    assert all(p["total"] == 7 and p["pages"] == 3 for p in pages)
    assert [i["id"] for p in pages for i in p["items"]] == made


def test_detail(mod_client: Any, api_auth: dict[str, str], clean_retrievals: str) -> None:
    rid = add_retrieval(clean_retrievals, zone="cautious", score=-1.5, top_topic=27,
                        candidates=[{"topic_id": 27, "post_id": 169, "score": -1.5,
                                     "fused_rank": 2},
                                    {"topic_id": 3, "post_id": 12, "score": -3.0,
                                     "fused_rank": 1}], reason=REASON)
    body = mod_client.get(f"{LIST}/{rid}", headers=api_auth).json
    assert body["id"] == rid and body["zone"] == "cautious"
    assert body["zone_reason"] == REASON  # which score decided, against which thresholds
    listed = mod_client.get(LIST, headers=api_auth).json["items"]
    assert [i["zone_reason"] for i in listed] == [REASON]
    assert body["conversation"][0]["role"] == "user"
    assert body["evidence"][0]["topic_id"] == 27
    titles = {c["topic_id"]: c["title"] for c in body["candidates"]}
    assert titles[27] == "Traefik, Caddy ou Nginx Proxy Manager pour débuter ?"
    assert mod_client.get(f"{LIST}/not-a-uuid", headers=api_auth).status_code == 404
    missing = mod_client.get(f"{LIST}/00000000-0000-0000-0000-000000000000", headers=api_auth)
    assert missing.status_code == 404 and missing.json["error"]["code"] == "not_found"


def test_label_store_replace_and_validate(
    mod_client: Any, api_auth: dict[str, str], clean_retrievals: str, mod_state: Any
) -> None:
    rid = add_retrieval(clean_retrievals, zone="abstain", score=-5.0)
    url = f"{LIST}/{rid}/label"
    ok = mod_client.post(url, headers=api_auth, json={
        "label": "should_have_answered", "right_topic_id": 27, "note": "the Caddy thread",
        "moderator": "alice"})
    assert ok.status_code == 200, ok.json
    assert ok.json["label"] == "should_have_answered" and ok.json["right_topic_id"] == 27
    again = mod_client.post(url, headers=api_auth, json={"label": "correct_abstention"})
    assert again.status_code == 200 and again.json["right_topic_id"] is None
    item = mod_client.get(f"{LIST}/{rid}", headers=api_auth).json
    assert item["label"]["label"] == "correct_abstention"

    with psycopg.connect(owner_url(mod_state.urls.database_url)) as conn:
        private_topic = conn.execute(
            "SELECT t.id FROM topics t JOIN categories c ON c.id = t.category_id"
            " WHERE c.read_restricted LIMIT 1").fetchone()[0]
        pm_topic = conn.execute(
            "SELECT id FROM topics WHERE archetype = 'private_message' LIMIT 1").fetchone()[0]
    for body, message in [
        ({"label": "should_have_answered"}, "right_topic_id"),
        ({"label": "correct_abstention", "right_topic_id": 27}, "takes no right_topic_id"),
        ({"label": "should_have_answered", "right_topic_id": private_topic}, "not a public"),
        ({"label": "should_have_answered", "right_topic_id": pm_topic}, "not a public"),
        ({"label": "should_have_answered", "right_topic_id": 999999}, "not a public"),
        ({"label": "should_have_answered", "right_topic_id": "27"}, "valid integer"),
        ({"label": "great"}, "label"),
        ({"label": "wrong_evidence", "note": "x" * 2001}, "note"),
        ({"label": "wrong_evidence", "extra": 1}, "extra"),
    ]:
        resp = mod_client.post(url, headers=api_auth, json=body)
        assert resp.status_code == 422, (body, resp.json)
        assert message in str(resp.json["error"]), (body, resp.json)
    bad_json = mod_client.post(url, headers={**api_auth, "Content-Type": "application/json"},
                               data=b"{oops")
    assert bad_json.status_code == 400
    missing = mod_client.post(f"{LIST}/00000000-0000-0000-0000-000000000000/label",
                              headers=api_auth, json={"label": "correct_abstention"})
    assert missing.status_code == 404


def test_calibration_follows_the_labels(mod_client: Any, api_auth: dict[str, str],
                                        clean_retrievals: str) -> None:
    def report() -> dict[str, Any]:
        body = mod_client.get("/v1/moderation/calibration", headers=api_auth).json
        assert body["configured"]["cross-encoder"] == {"abstain": -4.0, "normal": 0.0}
        return {s["scorer"]: s for s in body["scorers"]}

    ids = {s: add_retrieval(clean_retrievals, zone="abstain" if s < -4 else "cautious", score=s)
           for s in (-7.0, -6.0, -5.5, -5.0, -3.0, -1.0)}
    add_retrieval(clean_retrievals, zone="normal", score=2.0)
    assert report() == {}  # nothing labelled yet

    def label(score: float, verdict: str, topic: int | None = None) -> None:
        body: dict[str, Any] = {"label": verdict}
        if topic:
            body["right_topic_id"] = topic
        assert mod_client.post(f"{LIST}/{ids[score]}/label", headers=api_auth,
                               json=body).status_code == 200

    label(-7.0, "correct_abstention")
    label(-6.0, "correct_abstention")
    first = report()[CE]
    assert first["labels"]["correct_abstention"] == 2
    assert first["abstain"]["suggested"] is None  # no should_have_answered yet
    assert first["changed"] == 0

    label(-5.0, "should_have_answered", 27)  # right topic is the first evidence (27)
    label(-5.5, "should_have_answered", 36)
    second = report()[CE]
    assert second["labels"]["should_have_answered"] == 2
    assert second["abstain"]["suggested"] == pytest.approx(-5.75)
    assert second["abstain"]["counts"] == {"low_below": 2, "low_above": 0,
                                           "high_below": 0, "high_above": 2}
    assert second["scored_retrievals"] == 7
    # normal: the one confident answer (-5.0, right topic first) against the two abstentions;
    # of the perfect splits (midpoints), -5.5 is the closest to the configured 0
    assert second["normal"]["suggested"] == pytest.approx(-5.5)
    assert second["suggested"] == {"abstain": -5.75, "normal": -5.5}
    assert second["zone_changes"] == {"abstain→normal": 2, "cautious→normal": 2}
    assert second["changed"] == 4


def test_openapi_documents_the_moderation_api(mod_client: Any) -> None:
    spec = mod_client.get("/v1/openapi.json", headers={"Authorization": f"Bearer {API_KEY}"}).json
    paths = spec["paths"]
    for path, method in ((LIST, "get"), (f"{LIST}/{{retrieval_id}}", "get"),
                         (f"{LIST}/{{retrieval_id}}/label", "post"),
                         ("/v1/moderation/calibration", "get")):
        assert paths[path][method]["security"] == [{"moderator": []}], path
    params = {p["name"] for p in paths[LIST]["get"]["parameters"]}
    assert {"zone", "labelled", "label", "scorer", "from", "to", "q", "page"} <= params
    assert "LabelRequest" in spec["components"]["schemas"]
