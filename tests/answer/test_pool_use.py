"""A request never waits for a second pooled connection while it holds one: with a pool of one,
a thread that did would wait for itself (and, under load, a small pool starves)."""

from __future__ import annotations

from typing import Any

from sidecar.core.trace import Trace
from sidecar.db import Database
from sidecar.db.pool import SessionLimits
from sidecar.search.service import SearchService


def test_the_keyword_leg_finds_its_index_before_it_takes_a_connection(answer_state: Any) -> None:
    base = answer_state
    # A pool of one connection whose waits end after 2 s: a nested wait fails quickly.
    db = Database(base.db.url, min_size=1, max_size=1, limits=SessionLimits(statement_timeout_s=2))
    db.open()
    try:
        # A fresh search service: its keyword index has not looked up its folder yet (the
        # first request on a new node reads the index's id from the database).
        search = SearchService(db, base.embedder, base.model, base.settings,
                               iterative_scan=base.search.iterative_scan)
        trace = Trace()
        hits = search.keyword_ranking("wireguard", 20, trace)
        step = trace.get("keyword")
        assert step is not None and step.detail["index"] == "tantivy"
        assert hits, "the keyword leg found nothing with a pool of one connection"
        assert search.keyword.last_error is None
    finally:
        db.close()
