"""A hybrid search runs its two legs at once (SIDECAR_PARALLEL_LEGS), with the same outcome."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from sidecar.core.fusion import Fusion, FusionMethod
from sidecar.core.trace import Trace
from sidecar.core.types import Mode
from sidecar.search.service import SearchOptions, SearchService

QUERIES = ["bank account", "how do I renew my residence permit", "best beach for kids"]
HYBRID = SearchOptions(mode=Mode.HYBRID)


def service(res: Any, *, parallel: bool) -> SearchService:
    """A search over the demo state with the legs at once or in turn."""
    settings = res.settings.model_copy(update={"parallel_legs": parallel})
    return SearchService(res.db, res.embedder, res.model, settings,
                         iterative_scan=res.search.iterative_scan, keyword=res.search.keyword)


def meeting(svc: SearchService, timeout: float) -> threading.Barrier:
    """Make each leg wait, before it runs, until the other one has started too."""
    barrier = threading.Barrier(2, timeout=timeout)
    for name in ("semantic_ranking", "keyword_ranking"):
        inner: Callable[..., Any] = getattr(svc, name)

        def met(*args: Any, _inner: Callable[..., Any] = inner, **kwargs: Any) -> Any:
            barrier.wait()
            return _inner(*args, **kwargs)

        setattr(svc, name, met)  # the instance attribute shadows the method
    return barrier


def test_the_two_legs_run_at_the_same_time(demo_state: Any) -> None:
    svc = service(demo_state, parallel=True)
    meeting(svc, timeout=30)
    outcome = svc.find_topics("bank account", 5, HYBRID)
    assert outcome.legs["semantic"] > 0 and outcome.legs["keyword"] > 0


def test_in_turn_the_legs_never_meet(demo_state: Any) -> None:
    svc = service(demo_state, parallel=False)
    meeting(svc, timeout=0.5)
    with pytest.raises(threading.BrokenBarrierError):
        svc.find_topics("bank account", 5, HYBRID)


def test_at_once_or_in_turn_a_search_finds_the_same(demo_state: Any) -> None:
    both, serial = service(demo_state, parallel=True), service(demo_state, parallel=False)
    for query in QUERIES:
        a = both.find_topics(query, 8, HYBRID)
        b = serial.find_topics(query, 8, HYBRID)
        assert [(t.topic_id, round(t.score, 9)) for t in a.topics] == \
            [(t.topic_id, round(t.score, 9)) for t in b.topics], query
        assert a.legs == b.legs
        # The trace reads the same: each leg's own step, in the same order.
        assert [(s.step, s.status) for s in a.trace.steps] == \
            [(s.step, s.status) for s in b.trace.steps]
        names = [s.step for s in a.trace.steps]
        assert names.index("semantic") < names.index("keyword") < names.index("fuse")


def test_a_failing_keyword_leg_fails_the_search_and_says_so(demo_state: Any) -> None:
    svc = service(demo_state, parallel=True)

    class Broken:
        def searcher(self) -> Any:
            raise RuntimeError("keyword index unreadable")

    svc.keyword = Broken()  # type: ignore[assignment]
    trace = Trace()
    with pytest.raises(RuntimeError, match="unreadable"):
        svc.find_topics("bank account", 5, HYBRID, trace)
    step = trace.get("keyword")
    assert step is not None and step.status == "error"
    assert "unreadable" in step.detail["error"]
    semantic = trace.get("semantic")
    assert semantic is not None and semantic.status == "done"
    # The pool got both connections back: a search right after works.
    svc.keyword = demo_state.search.keyword
    assert svc.find_topics("bank account", 5, HYBRID).topics


def test_lift_reads_the_keyword_posts_similarities_on_its_leg_as_it_would_apart(
    demo_state: Any,
) -> None:
    # lift fusion scores the posts only the keyword leg found with their stored similarity:
    # read by the keyword leg on its own connection, they are those read in a query apart.
    for parallel in (True, False):
        svc = service(demo_state, parallel=parallel)
        config = svc.config(SearchOptions(mode=Mode.HYBRID, fusion=Fusion(FusionMethod.LIFT)))
        assert config.fusion.method is FusionMethod.LIFT and len(config.legs()) == 2
        strategy = demo_state.settings.strategy
        compared = 0
        for query in QUERIES:
            vector = svc.embedder.embed([query], kind="query")[0]
            stored: dict[int, float] = {}
            rankings = svc.leg_rankings(query, vector, config.legs(), 5, strategy, Trace(),
                                        similarities=stored)
            apart = svc.keyword_only_similarities(rankings, config, vector, strategy)
            assert svc.keyword_only_similarities(rankings, config, vector, strategy,
                                                 stored) == apart
            compared += len(apart)
        assert compared > 0  # some posts were found by the keyword leg alone
