"""The rerank chain through the real pipeline: POST /v1/search and /v1/retrieve over the demo.

Flags off must leave every response byte-identical to the pipeline without the chain; flags on
must reorder, cut and say so in the trace.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from sidecar.config.settings import Settings
from sidecar.core.chain import ChainFlags, boost
from sidecar.db.chain_read import post_vectors
from sidecar.search.chain import RerankChain
from sidecar.search.service import SearchOptions, SearchService
from tests.conftest import API_KEY
from tests.helpers import demo_queries

AUTH = {"Authorization": f"Bearer {API_KEY}"}
QUERIES = [q["text"] for q in demo_queries()]
ALL_ON = {"chain_mmr": True, "chain_boosts": True, "chain_knee": True,
          "chain_knee_sensitivity": 0.0}

# What legitimately differs between two identical requests: timings and the stored row's id.
_VOLATILE = re.compile(rb'"([a-z_]*_)?ms":\s*[0-9.eE+-]+|"retrieval_id":\s*"[0-9a-f-]+"')


def raw(client: Any, path: str, body: dict[str, Any]) -> bytes:
    resp = client.post(path, json=body, headers=AUTH)
    assert resp.status_code == 200, resp.json
    return bytes(_VOLATILE.sub(b'"volatile"', resp.get_data()))


def capture(client: Any, queries: list[str]) -> list[bytes]:
    """The raw bodies of /v1/search and /v1/retrieve for each question."""
    out = []
    for query in queries:
        out.append(raw(client, "/v1/search", {"query": query, "limit": 10}))
        out.append(raw(client, "/v1/retrieve",
                       {"messages": [{"role": "user", "content": query}]}))
    return out


@pytest.fixture
def no_chain_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every entry point of the chain, recording a call instead of running."""
    calls: list[str] = []

    def record(name: str) -> Callable[..., Any]:
        def called(*args: Any, **kwargs: Any) -> Any:
            calls.append(name)
            raise AssertionError(f"{name} ran with every chain flag off")
        return called

    monkeypatch.setattr(RerankChain, "run", record("RerankChain.run"))
    monkeypatch.setattr("sidecar.search.chain.apply_chain", record("apply_chain"))
    monkeypatch.setattr("sidecar.answer.pipeline.knee_cut", record("knee_cut"))
    yield calls


def bypass(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pipeline as it was before the chain: no hook at all after aggregation or rerank."""
    monkeypatch.setattr(SearchService, "rerank_chain",
                        lambda self, topics, *args, **kwargs: topics)
    monkeypatch.setattr(SearchService, "chain_flags", lambda self, options: ChainFlags())


@pytest.mark.parametrize("scorer", ["bi-encoder", "cross-encoder"])
def test_flags_off_responses_are_byte_identical_to_the_pipeline_without_the_chain(
    make_client: Callable[..., Any], tiny_reranker: Any, monkeypatch: pytest.MonkeyPatch,
    no_chain_calls: list[str], scorer: str,
) -> None:
    reranker = tiny_reranker if scorer == "cross-encoder" else None
    # Every demo question once; the cross-encoder's run (the same code after the rerank) on
    # a third of them, to keep the test's time reasonable.
    queries = QUERIES if reranker is None else QUERIES[::3]
    flags_off = capture(make_client(reranker=reranker), queries)
    assert no_chain_calls == []
    with monkeypatch.context() as patch:
        bypass(patch)
        without_chain = capture(make_client(reranker=reranker), queries)
    assert len(flags_off) == 2 * len(queries)
    assert flags_off == without_chain
    assert not any(b'"chain"' in body or b'"knee"' in body for body in flags_off)


def test_flags_on_reorder_cut_and_report_in_the_trace(make_client: Callable[..., Any]) -> None:
    off, on = make_client(), make_client(**ALL_ON)
    changed = 0
    for query in QUERIES:
        base = off.post("/v1/search", json={"query": query, "limit": 10}, headers=AUTH).json
        body = on.post("/v1/search", json={"query": query, "limit": 10}, headers=AUTH).json
        steps = {s["step"]: s for s in body["trace"]}
        chain = steps["chain"]
        assert chain["status"] == "done" and chain["detail"]["stages"] == ["mmr", "boosts"]
        assert chain["detail"]["features"] > 0 and chain["detail"]["vectors"] > 0
        assert [s["step"] for s in body["trace"]].index("chain") == \
            [s["step"] for s in body["trace"]].index("aggregate") + 1
        assert len(body["results"]) == len(base["results"]) > 0
        changed += [r["topic_id"] for r in body["results"]] != \
            [r["topic_id"] for r in base["results"]]
    assert changed > 0
    cut = 0
    for query in QUERIES[:12]:
        body = on.post("/v1/retrieve", json={"messages": [{"role": "user", "content": query}]},
                       headers=AUTH).json
        knee = {s["step"]: s for s in body["trace"]}["knee"]
        assert knee["status"] == "done"
        assert len(body["evidence"]) == knee["detail"]["kept"] <= knee["detail"]["of"] <= 6
        assert knee["detail"]["kept"] >= 2  # SIDECAR_CHAIN_KNEE_MIN_ITEMS
        cut += knee["detail"]["kept"] < knee["detail"]["of"]
    assert cut > 0  # sensitivity 0: any curve below its chord is cut


def test_boosts_in_search_read_the_forum_and_lift_accepted_answers(answer_state: Any) -> None:
    """find_topics loads each candidate's features from the database and boosts the whole
    aggregated list before cutting it: a topic whose linked post is the accepted answer never
    loses a place, and the order is the pure chain's on those features."""
    search = answer_state.search
    flags = ChainFlags(boosts=True, boost_positions=3, boost_likes=0, boost_category=0,
                       boost_closed=0)
    query = "how do I fix my home server problem"
    base = search.find_topics(query, 500, SearchOptions()).topics
    boosted = search.find_topics(query, 500, SearchOptions(chain=flags)).topics
    with answer_state.db.connection() as conn:
        features = search.chain.reader.features(conn, [(t.topic_id, t.best.post_id)
                                                       for t in base])
    assert [t.topic_id for t in boosted] == \
        [t.topic_id for t in boost(base, features, flags, datetime.now(UTC))]
    answered = [t.topic_id for t in base
                if features[t.topic_id].accepted_answer_post_id == t.best.post_id]
    unsolved = [t.topic_id for t in base if features[t.topic_id].accepted_answer_post_id is None]
    assert answered and unsolved  # the query meets both kinds
    old, new = [t.topic_id for t in base], [t.topic_id for t in boosted]
    assert all(new.index(i) <= old.index(i) for i in answered)
    assert any(new.index(i) < old.index(i) for i in answered)
    assert all(new.index(i) >= old.index(i) for i in unsolved)


def redundancy(vectors: dict[int, np.ndarray], post_ids: list[int]) -> float:
    """Mean pairwise cosine of the linked posts (intra-list redundancy)."""
    m = np.stack([vectors[p] / np.linalg.norm(vectors[p]) for p in post_ids])
    sims = m @ m.T
    n = len(post_ids)
    return float((sims.sum() - n) / (n * (n - 1)))


def test_mmr_lowers_the_redundancy_of_the_first_results(answer_state: Any) -> None:
    search, model = answer_state.search, answer_state.model
    before, after = [], []
    for query in QUERIES:
        base = search.find_topics(query, 5, SearchOptions()).topics[:5]
        mmr = search.find_topics(query, 5, SearchOptions(chain=ChainFlags(
            mmr=True, mmr_lambda=0.5))).topics[:5]
        ids = [t.best.post_id for t in base + mmr]
        with answer_state.db.connection() as conn:
            vectors = post_vectors(conn, model_id=model.id, strategy_id=1,
                                   dimensions=model.dimensions, post_ids=ids)
        before.append(redundancy(vectors, [t.best.post_id for t in base]))
        after.append(redundancy(vectors, [t.best.post_id for t in mmr]))
    assert np.mean(after) < np.mean(before)
    assert sum(a < b - 1e-9 for a, b in zip(after, before, strict=True)) > 0


def test_a_failing_chain_degrades_to_the_fused_order(
    answer_state: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    search = answer_state.search
    query = QUERIES[0]
    base = search.find_topics(query, 10, SearchOptions()).topics

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("features table is locked")

    monkeypatch.setattr(RerankChain, "run", broken)
    outcome = search.find_topics(query, 10, SearchOptions(chain=ChainFlags(boosts=True)))
    step = outcome.trace.get("chain")
    assert step is not None and step.status == "error"
    assert "features table is locked" in step.detail["error"]
    assert [t.topic_id for t in outcome.topics] == [t.topic_id for t in base]


def test_chain_settings_come_from_the_environment_and_are_checked(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Settings().chain_flags() == ChainFlags()
    monkeypatch.setenv("SIDECAR_CHAIN_MMR", "1")
    monkeypatch.setenv("SIDECAR_CHAIN_MMR_LAMBDA", "0.6")
    monkeypatch.setenv("SIDECAR_CHAIN_KNEE_MIN_ITEMS", "3")
    flags = Settings().chain_flags()
    assert flags.mmr and flags.mmr_lambda == 0.6 and flags.knee_min_items == 3
    assert not flags.boosts
    monkeypatch.setenv("SIDECAR_CHAIN_MMR_LAMBDA", "1.5")
    with pytest.raises(ValidationError, match="mmr_lambda"):
        Settings()
