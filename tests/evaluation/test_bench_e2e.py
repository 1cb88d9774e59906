"""The end-to-end benchmark: a real `sidecar serve` subprocess, HTTP clients, stage times."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sidecar.bench import e2e_part
from sidecar.bench.report import BenchContext
from sidecar.evaluation.state import prepare_state


def test_e2e_quick_over_a_prepared_evaluation_forum(
    tmp_path: Path, eval_settings: Any, eval_dump: Path, minilm: Any
) -> None:
    settings = eval_settings.model_copy(update={"workers": 1, "threads": 4})
    prepare_state(settings, eval_dump, embedder=minilm, progress=False).close()
    ctx = BenchContext(settings, tmp_path / "out", quick=True, extras={"dump": eval_dump})
    ctx.out_dir.mkdir(parents=True)
    latency, stages = e2e_part.run(ctx)
    rows = {(r[0], r[1]): r for r in latency.rows}
    col = latency.columns.index
    for endpoint in ("/v1/search", "/v1/retrieve"):
        for clients in e2e_part.CLIENTS:
            row = rows[(endpoint, clients)]
            assert row[col("errors")] == 0, row
            assert row[col("requests")] >= 16
            assert 0 < row[col("p50 ms")] <= row[col("p95 ms")] <= row[col("p99 ms")]
            assert row[col("req/s")] > 0
    assert latency.notes[0].startswith(f"evaluation forum {eval_dump.name};")
    # Stage times come from the responses' traces.
    assert {"embed", "semantic", "keyword", "fuse", "aggregate", "hydrate"} <= set(stages.columns)
    assert "rerank" in stages.columns or "zone" in stages.columns
    raw = json.loads((ctx.out_dir / "e2e.json").read_text())
    assert len(raw) == 4 and all(r["latencies_ms"] for r in raw)
    assert (ctx.out_dir / "server.log").is_file()


def test_request_builders_follow_the_served_description() -> None:
    both = e2e_part.request_builders({"paths": {"/v1/search": {}, "/v1/retrieve": {}}})
    search, retrieve = both["/v1/search"], both["/v1/retrieve"]
    assert search is not None and search("q")["query"] == "q"
    assert retrieve is not None
    assert retrieve("q") == {"messages": [{"role": "user", "content": "q"}]}
    only_search = e2e_part.request_builders({"paths": {"/v1/search": {}}})
    assert only_search["/v1/retrieve"] is None


def test_free_port_is_bindable() -> None:
    import socket

    port = e2e_part.free_port()
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


def test_quick_without_prepared_state_falls_back_to_the_demo_forum(
    eval_settings: Any, eval_dump: Path
) -> None:
    state, queries, source = e2e_part._eval_source(eval_settings, eval_dump, quick=True)
    try:
        assert source.startswith("demo forum")
        assert len(queries) > 10 and all(queries)
        assert state.dump.name == "demo"
    finally:
        state.close()
