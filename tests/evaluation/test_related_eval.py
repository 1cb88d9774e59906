"""`sidecar eval-related` on the demo forum: the copy with each query as a topic, related lists
against search, the composer's thresholds and its silence on another dump's questions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from sidecar.cli.main import main
from sidecar.evaluation.dataset import load_dataset
from sidecar.evaluation.related_dump import CATEGORY_NAME, write_related_dump
from sidecar.evaluation.related_stats import choose_threshold, passed, threshold_row
from sidecar.runtime.bootstrap import demo_dir
from tests.evaluation.conftest import write_eval_dump
from tests.evaluation.test_cli import _env


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_each_query_becomes_a_topic_of_its_own_in_a_copy(tmp_path: Path) -> None:
    dump = write_eval_dump(tmp_path / "dump")
    queries = list(load_dataset(dump, "subject+body").queries)
    copy = write_related_dump(dump, queries, tmp_path / "copies")
    topics, posts = _lines(copy.directory / "topics.jsonl"), _lines(copy.directory / "posts.jsonl")
    added = {t["id"]: t for t in topics if t["external_id"] == f"query:{queries[0].id}"}
    (tid,) = added
    assert copy.topics[queries[0].id] == tid and tid > 99  # after every topic of the dump
    assert added[tid]["title"] == queries[0].text  # the subject
    (body,) = [p for p in posts if p["topic_id"] == tid]
    assert body["raw"] == queries[0].details and body["post_number"] == 1
    category = _lines(copy.directory / "categories.jsonl")[-1]
    assert added[tid]["category_id"] == category["id"]
    assert category["name"] == CATEGORY_NAME and not category["read_restricted"]
    assert len(copy.query_topics) == len(queries)
    # Written once: a second call reuses the folder.
    again = write_related_dump(dump, queries, tmp_path / "copies")
    assert again == copy


def test_the_composer_threshold_is_chosen_for_silence_then_hits() -> None:
    judged = [[(1, 0.9), (2, 0.5)], [(3, 0.45), (4, 0.2)]]
    qrels = [{1: 2}, {3: 1}]
    elsewhere = {"other": [[(5, 0.3)], [(6, 0.47)], [(7, 0.1)], [(8, None)]]}
    assert passed(judged[0], 0.5) == [1, 2] and passed(judged[1], 0.5) == []
    low = threshold_row("abstain", 0.4, judged, qrels, elsewhere)
    high = threshold_row("normal", 0.6, judged, qrels, elsewhere)
    assert (low["hit@5"], low["silent"], low["silence_elsewhere"]["other"]) == (1.0, 0.0, 0.75)
    assert (high["hit@5"], high["silent"], high["silence_elsewhere"]["other"]) == (0.5, 0.5, 1.0)
    assert not low["meets_silence_target"] and high["meets_silence_target"]
    assert choose_threshold([low, high], ("abstain", "normal")) == "normal"
    assert choose_threshold([low], ("abstain", "normal")) is None


def test_eval_related_on_the_demo(eval_settings: Any, tmp_path: Path) -> None:
    other = write_eval_dump(tmp_path / "other")
    out = tmp_path / "related"
    result = CliRunner().invoke(main, [
        "eval-related", "--dump", str(demo_dir()), "--ood", str(other), "--resamples", "200",
        "--calibration-questions", "20", "--out", str(out)], env=_env(eval_settings))
    assert result.exit_code == 0, result.output
    doc = json.loads((out / "related.json").read_text())
    assert (out / "related.md").read_text().startswith("# Related topics")
    systems = {s["system"]: s for s in doc["related"]["systems"]}
    assert set(systems) == {"related_hybrid", "related_semantic", "search"}
    assert all(s["n"] == 36 and s["empty"] == 0 for s in systems.values())
    # The demo's questions find their topic as well through related as through search.
    assert systems["related_hybrid"]["hit@5"] >= 0.8 and systems["search"]["hit@5"] >= 0.8
    names = {(c["system"], c["baseline"]) for c in doc["related"]["comparisons"]}
    assert ("related_hybrid", "search") in names
    for c in doc["related"]["comparisons"]:
        assert c["mrr@10"]["ci_low"] <= c["mrr@10"]["diff"] <= c["mrr@10"]["ci_high"]
    similar = doc["similar"]
    assert similar["elsewhere_questions"] == {"other": 5}
    rows = {r["threshold"]: r for r in similar["thresholds"]}
    assert set(rows) == {"abstain", "normal", "settings_abstain", "settings_normal"}
    assert rows["abstain"]["value"] < rows["normal"]["value"]
    assert rows["normal"]["silent"] >= rows["abstain"]["silent"]
    assert len(similar["curve"]) == 21
    assert doc["meta"]["seeded"].startswith("DATABASE_URL is set")
