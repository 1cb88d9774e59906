"""The answer benchmark: a real `sidecar serve` whose LLM is the bench's Ollama stub."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import ollama

from sidecar.bench import answer_part
from sidecar.bench.llm_stub import OllamaStub
from sidecar.bench.report import BenchContext
from sidecar.bench.runner import PARTS, load_part


def test_answer_part_quick(tmp_path: Path, eval_settings: Any) -> None:
    settings = eval_settings.model_copy(update={"workers": 1, "threads": 4})
    ctx = BenchContext(settings, tmp_path / "out", quick=True,
                       extras={"pairs": 4, "streams": 2})
    ctx.out_dir.mkdir(parents=True)
    over, own, stream = answer_part.run(ctx)

    def rows(table: Any) -> dict[str, list[Any]]:
        assert table.columns == ["measure", "n", "p50 ms", "p95 ms", "what"]
        return {row[0]: row for row in table.rows}

    measured = rows(over)
    assert list(measured) == ["/v1/retrieve", "/v1/answer", "answer − retrieve"]
    assert all(row[1] == 4 and row[2] is not None and row[2] <= row[3]
               for row in measured.values())
    # The demo answers the question: a zone that asks the LLM, and the sanitizer did its work.
    assert "zone normal, outcome answered" in over.notes[0] or \
        "zone cautious, outcome answered" in over.notes[0]
    assert "errors: 0" in over.notes[1]
    stages = rows(own)
    assert list(stages) == ["prompt", "generate", "sanitize", "log", "prompt + sanitize + log"]
    assert all(row[1] == 4 and row[2] > 0 for row in stages.values())
    assert "goal <= 10 ms at p95: " in stages["prompt + sanitize + log"][4]
    streamed = rows(stream)
    assert list(streamed) == ["LLM's own first token", "LLM first token, server side",
                              "retrieval event", "first sanitized delta",
                              "first delta − retrieval event", "whole answer"]
    assert streamed["LLM's own first token"][1] == 3  # the warm-up too: measured at the stub
    assert all(row[1] == 2 for name, row in streamed.items() if name != "LLM's own first token")
    # The stub waits its interval before the first token; nothing is sent before the retrieval.
    assert streamed["LLM's own first token"][2] >= answer_part.STREAM_INTERVAL_S * 1000
    assert streamed["retrieval event"][2] < streamed["first sanitized delta"][2] \
        < streamed["whole answer"][2]
    assert "an unchecked link sent: False" in stream.notes[1]
    raw = json.loads((ctx.out_dir / "answer.json").read_text())
    assert raw["seen"]["removed"]["citations"] == 1 and raw["seen"]["removed"]["links"] >= 3
    assert len(raw["at_once"]["answer"]) == 4
    assert (ctx.out_dir / "server.log").is_file()


def test_the_part_is_registered() -> None:
    assert PARTS["answer"] == "sidecar.bench.answer_part"
    assert load_part("answer") is answer_part.run


def test_the_stub_speaks_ollama_to_the_official_client() -> None:
    with OllamaStub("one two three four", chunk_chars=5) as stub:
        client = ollama.Client(host=stub.url, timeout=10)
        whole = client.chat(model="m", messages=[{"role": "user", "content": "q"}], stream=False)
        assert whole.message.content == "one two three four" and whole.done
        parts = list(client.chat(model="m", messages=[{"role": "user", "content": "q"}],
                                 stream=True))
        assert [p.message.content for p in parts] == ["one t", "wo th", "ree f", "our", ""]
        assert parts[-1].done and parts[-1].eval_count == 4
        assert len(stub.first_token_ms) == 2
