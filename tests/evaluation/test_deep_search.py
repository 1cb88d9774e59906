"""Protocol B asks the search for deep lists: more candidates than hnsw.ef_search allows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sidecar.core.types import Mode
from sidecar.db.search_sql import EF_SEARCH_MAX
from sidecar.evaluation.state import prepare_state
from sidecar.search.service import SearchOptions, SearchService


def test_a_deep_semantic_list_beyond_ef_search_max(
    eval_settings: Any, eval_dump: Path, minilm: Any
) -> None:
    # 300 topics = 1,500 posts asked of the leg, above pgvector's ef_search ceiling of 1,000:
    # the iterative scan must supply them instead of PostgreSQL refusing the setting.
    state = prepare_state(eval_settings, eval_dump, embedder=minilm, progress=False,
                          index_kinds=("halfvec", "binary"))
    try:
        res = state.resources
        n = EF_SEARCH_MAX // 5 + 100
        for kind in ("halfvec", "binary"):
            settings = res.settings.model_copy(update={"index_kind": kind})
            service = SearchService(res.db, res.embedder, res.model, settings,
                                    iterative_scan=res.search.iterative_scan)
            outcome = service.find_topics("bank account", n, SearchOptions(mode=Mode.SEMANTIC))
            # Every public post is reached, so every public topic comes back (8 of 9 topics).
            assert outcome.legs["semantic"] == state.embedded[1] == 24, kind
            assert sorted(t.topic_id for t in outcome.topics) == list(range(1, 9)), kind
    finally:
        state.close()
