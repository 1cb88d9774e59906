"""The linked post over HTTP on the demo forum: the reply that answers, never a private one."""

from __future__ import annotations

from typing import Any


def first(client: Any, auth: dict[str, str], query: str, **extra: Any) -> dict[str, Any]:
    resp = client.post("/v1/search", json={"query": query, "limit": 3, **extra}, headers=auth)
    assert resp.status_code == 200, resp.json
    result: dict[str, Any] = resp.json["results"][0]
    return result


def test_a_solved_topic_links_its_accepted_answer(client: Any, auth: dict[str, str]) -> None:
    result = first(client, auth, "quiet mini PC for a 24/7 Proxmox node, fan noise in the BIOS")
    assert result["topic_id"] == 2
    assert result["post"]["id"] == 6  # the accepted answer, not the question (post 5)
    assert result["post"]["chosen"] == "accepted answer"
    assert result["url"].endswith("/t/quietest-mini-pc-for-a-24-7-proxmox-node/2/2")


def test_each_chooser_links_a_different_post_of_the_same_topic(
    client: Any, auth: dict[str, str]
) -> None:
    # Topic 9's question (post 70) repeats the query's words; its accepted answer is post 71.
    query = "WireGuard behind CGNAT with a VPS relay and PersistentKeepalive"
    served = first(client, auth, query)
    assert served["topic_id"] == 9 and served["post"]["id"] == 71
    trace = client.post("/v1/search", json={"query": query, "limit": 3},
                        headers=auth).json["trace"]
    link = next(s for s in trace if s["step"] == "link")
    assert link["status"] == "done" and link["detail"]["chooser"] == "answer"
    assert link["detail"]["reasons"]["accepted answer"] >= 1


def test_the_linked_post_is_never_a_hidden_one(client: Any, auth: dict[str, str]) -> None:
    # Post 74 (hidden spam in topic 9) is the most similar post to its own words.
    result = first(client, auth, "FREE unlimited VPN tunnels work through any CGNAT")
    assert result["post"]["id"] != 74
    for r in client.post("/v1/search", json={"query": "FREE unlimited VPN tunnels CGNAT",
                                             "limit": 10}, headers=auth).json["results"]:
        assert r["post"]["id"] != 74


def test_retrieve_cites_the_linked_post(client: Any, auth: dict[str, str]) -> None:
    resp = client.post("/v1/retrieve", headers=auth, json={"messages": [
        {"role": "user", "content": "How do I get WireGuard through CGNAT with a cheap VPS?"}]})
    assert resp.status_code == 200, resp.json
    evidence = {e["topic_id"]: e for e in resp.json["evidence"]}
    assert evidence[9]["post_id"] == 71
    assert evidence[9]["url"].endswith("/9/2")


def test_left_out_topics_never_come_back(demo_state: Any) -> None:
    from sidecar.core.types import Mode
    from sidecar.search.service import SearchOptions

    query = "WireGuard behind CGNAT with a VPS relay and PersistentKeepalive"
    for mode in Mode:
        found = demo_state.search.find_topics(query, 20, SearchOptions(mode=mode)).topics
        assert found[0].topic_id == 9
        hidden = frozenset({9, found[1].topic_id})
        left = demo_state.search.find_topics(
            query, 20, SearchOptions(mode=mode, exclude_topics=hidden)).topics
        assert left and not {t.topic_id for t in left} & hidden
        assert {p.topic_id for t in left for p in t.posts}.isdisjoint(hidden)


def test_a_learned_rule_in_the_profile_is_the_one_served(demo_state: Any, tmp_path: Any) -> None:
    from sidecar.core.postchoice import LinkRule
    from sidecar.search.profile import load_served, with_link_rule, write_profile
    from sidecar.search.service import SearchOptions, SearchService

    settings = demo_state.settings.model_copy(update={"search_profile": tmp_path / "p.json"})
    rule = LinkRule.of({"opening": 5.0, "similarity": 1.0}, "learned on 40 labelled topics")
    write_profile(settings.profile_path(), with_link_rule(
        settings.profile_path(), rule, {"served": "learned"}, model=demo_state.model.name,
        strategy=1, settings=settings))
    state = load_served(settings, demo_state.model.name)
    assert state.link_rule() == rule and state.source == "settings"  # the search is untuned
    service = SearchService(demo_state.db, demo_state.embedder, demo_state.model, settings,
                            keyword=demo_state.search.keyword, link_rule=state.link_rule())
    found = service.find_topics("WireGuard behind CGNAT with a VPS relay", 3, SearchOptions())
    first = found.topics[0]
    assert first.topic_id == 9 and first.link_id == 70  # this rule prefers the question
    assert first.link_reason == "learned rule (learned on 40 labelled topics)"
