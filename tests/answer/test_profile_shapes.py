"""A search profile has a slot per query shape: a query alone, and a query with details.

The best fusion differs between the two (the keyword leg reads only the title of a question
that comes with its body), so `sidecar tune --query title+body` fills the second slot without
touching the first, and `/v1/search` serves each request the slot of its shape.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from sidecar.config.settings import Settings
from sidecar.core.searchconfig import SearchConfig
from sidecar.core.types import Mode
from sidecar.search.profile import (
    load_served,
    read_profile,
    settings_config,
    updated_profile,
    write_profile,
)
from sidecar.search.profile_schema import ProfileSlot, SearchProfile, ServedModel
from tests.conftest import API_KEY

AUTH = {"Authorization": f"Bearer {API_KEY}"}
SEMANTIC = ServedModel.of(SearchConfig(Mode.SEMANTIC))
KEYWORD = ServedModel.of(SearchConfig(Mode.KEYWORD))


def tuned(model: str, served: ServedModel, note: str) -> SearchProfile:
    return SearchProfile(model=model, served=served, tuning={"note": note})


def test_tuning_one_shape_keeps_the_other(tmp_path: Path) -> None:
    settings = Settings(state_dir=tmp_path)
    path = settings.profile_path()
    # With details first, on a forum without a profile: plain queries keep the settings' search.
    first = updated_profile(path, tuned("m", KEYWORD, "details"), details=True, settings=settings)
    assert first.with_details is not None and first.with_details.served == KEYWORD
    assert first.served == ServedModel.of(settings_config(settings))  # the settings' default
    write_profile(path, first)
    # Then plain queries: the details slot stays.
    second = updated_profile(path, tuned("m", SEMANTIC, "plain"), details=False,
                             settings=settings)
    assert second.served == SEMANTIC and second.tuning == {"note": "plain"}
    assert second.with_details == ProfileSlot(served=KEYWORD, tuning={"note": "details"})
    write_profile(path, second)
    assert read_profile(path)[0] == second
    # Tuned with another model: the other slot's choice says nothing about it and goes.
    third = updated_profile(path, tuned("other", SEMANTIC, "x"), details=False,
                            settings=settings)
    assert third.model == "other" and third.with_details is None


def test_each_request_is_served_the_slot_of_its_shape(
    make_client: Callable[..., Any], answer_state: Any, tmp_path: Path
) -> None:
    path = tmp_path / "profile.json"
    profile = tuned(answer_state.model.name, SEMANTIC, "plain").with_slot(
        ProfileSlot(served=KEYWORD, tuning={"held_out": {"mrr@10": 0.5}}), details=True)
    write_profile(path, profile)
    client = make_client(search_profile=path)
    state = load_served(client.resources.settings, answer_state.model.name)
    assert state.config_for(details=False).mode is Mode.SEMANTIC
    assert state.config_for(details=True).mode is Mode.KEYWORD

    question = {"query": "ZFS pool degraded", "limit": 5}
    plain = client.post("/v1/search", json=question, headers=AUTH).json
    with_body = client.post("/v1/search", headers=AUTH, json={
        **question, "details": "one disk shows checksum errors after a scrub"}).json
    blank = client.post("/v1/search", json={**question, "details": "  "}, headers=AUTH).json
    assert plain["config"]["mode"] == "semantic" == blank["config"]["mode"]
    assert with_body["config"]["mode"] == "keyword"
    # The legs that ran are the slot's: no embedding for the keyword-only slot.
    steps = {s["step"]: s["status"] for s in with_body["trace"]}
    assert steps["embed"] == "skipped" and steps["semantic"] == "skipped"
    assert {s["step"]: s["status"] for s in plain["trace"]}["keyword"] == "skipped"
    # A request's own mode still wins over either slot.
    forced = client.post("/v1/search", headers=AUTH, json={
        **question, "details": "scrub", "mode": "hybrid"}).json
    assert forced["config"]["mode"] == "hybrid"

    health = client.get("/v1/health", headers=AUTH).json["search"]
    assert health["served"]["mode"] == "semantic"
    assert health["served_with_details"]["mode"] == "keyword"
    assert health["held_out_with_details"] == {"mrr@10": 0.5}
