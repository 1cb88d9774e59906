"""`sidecar eval` on a tiny synthetic dump: state reuse, the matrix, the metrics, the outputs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from sidecar.evaluation import metrics as m
from sidecar.evaluation.configs import CATALOGUE
from sidecar.evaluation.dataset import load_dataset
from sidecar.evaluation.evaluate import run_evaluation
from sidecar.evaluation.report import to_markdown, write_outputs
from sidecar.evaluation.stages import CrossEncoderRerank
from sidecar.evaluation.state import StateNotReady, prepare_state
from sidecar.search.service import SearchOptions
from tests.evaluation.conftest import PRIVATE_TOPIC, QUERIES, write_eval_dump

# The catalogue's default configurations, then what POST /v1/search serves.
# The tiny dump grades posts: the served configuration also runs with the other post choosers.
DEFAULT_NAMES = [c.name for c in CATALOGUE if c.default and not c.stages] + [
    "served", "served-link-fused", "served-link-semantic"]


@pytest.fixture
def doc(eval_settings: Any, eval_dump: Path, minilm: Any) -> dict[str, Any]:
    """The default matrix on the tiny dump (no cross-encoder configured)."""
    return run_evaluation(eval_settings, eval_dump, embedder=minilm, resamples=300,
                          progress=False)


def test_runs_the_default_matrix_and_skips_rerank_without_a_cross_encoder(
    doc: dict[str, Any]
) -> None:
    names = [c["name"] for c in doc["configs"]]
    assert names == DEFAULT_NAMES  # the baseline first, then the catalogue order, then served
    # Without a search profile, the settings decide what is served (the keyword lift).
    served = meta_served(doc)
    assert served["source"] == "settings" and served["served_by"]["source"] == "settings"
    assert served["served"] == {
        "mode": "hybrid", "legs": ["semantic", "keyword"], "topic_score": "best",
        "fusion": {"method": "lift", "lift": 0.02}}
    served_vs = {c["reference"] for c in doc["comparisons"] if c["config"] == "served"}
    assert served_vs == {"semantic-best", "keyword-best", "hybrid-best", "served-link-fused",
                         "served-link-semantic"}
    assert set(doc["skipped"]) == {"semantic-best-rerank", "hybrid-best-rerank",
                                   "hybrid-lift-rerank", "hybrid-best-rerank-knee"}
    assert all("cross-encoder" in reason for reason in doc["skipped"].values())
    meta = doc["meta"]
    assert meta["queries_total"] == len(QUERIES)
    assert meta["queries_scored"] == len(QUERIES) - 1  # Q5 has no relevant topic
    assert meta["state"]["reused"] is False
    assert meta["forum"]["topics"] == 9
    assert all(len(doc["per_query"][n]) == 4 for n in names)


def meta_served(doc: dict[str, Any]) -> dict[str, Any]:
    """The served configuration named in the result's meta (without the free-text note)."""
    return {k: v for k, v in doc["meta"]["service_config"].items()
            if k in ("source", "served", "served_by")}


def test_per_query_scores_follow_from_the_rankings(doc: dict[str, Any]) -> None:
    dataset = {q.id: q for q in load_dataset(Path(doc["meta"]["dump"])).queries}
    for name, rows in doc["per_query"].items():
        for row in rows:
            q = dataset[row["query_id"]]
            top = row["top_topics"]
            assert len(top) == len(set(top))
            assert row["hit@5"] == m.hit_at(top, q.topics, 5)
            assert row["mrr@10"] == pytest.approx(m.reciprocal_rank(top, q.topics, 10))
            assert row["ndcg@10"] == pytest.approx(m.ndcg_at(top, q.topics, 10), abs=1e-6)
            assert row["post_hit@5"] == m.hit_at(row["linked_posts"], q.posts, 5)
            # Protocol B ranks exactly the judged topics.
            assert sorted(row["protocol_b_ranking"]) == sorted(q.topics)
            assert row["map_b"] == pytest.approx(
                m.average_precision(row["protocol_b_ranking"], q.topics), abs=1e-6)
            # The evidence /v1/retrieve keeps: its limit (6), fewer only with the knee on.
            kept = int(row["evidence_items"])
            assert row["evidence_hit"] == m.hit_at(top, q.topics, kept)
            if name == "hybrid-best-knee":
                assert 2 <= kept <= min(6, len(top))
            else:
                assert kept == min(6, len(top))
            if len(top) >= 2:
                assert -1.0 <= row["redundancy@5"] <= 1.0 + 1e-9
            else:
                assert row["redundancy@5"] is None
        means = doc["metrics"][name]
        assert means["mrr@10"] == pytest.approx(np.mean([r["mrr@10"] for r in rows]), abs=1e-6)


def test_semantic_search_finds_the_obvious_topics_and_never_a_private_one(
    doc: dict[str, Any]
) -> None:
    # Each query paraphrases one topic: the bi-encoder must rank it first.
    assert doc["metrics"]["semantic-best"]["hit@1"] == 1.0
    assert doc["metrics"]["semantic-best"]["map_b"] == 1.0
    for rows in doc["per_query"].values():
        for row in rows:
            assert PRIVATE_TOPIC not in row["top_topics"]


def test_every_configuration_is_compared_with_the_baseline(doc: dict[str, Any]) -> None:
    base = [c for c in doc["comparisons"] if c["kind"] == "baseline"]
    assert {c["config"] for c in base} == set(DEFAULT_NAMES) - {"semantic-best"}
    for c in doc["comparisons"]:
        assert c["wins"] + c["losses"] + c["ties"] == c["n"] == 4
        for stats in c["metrics"].values():
            assert stats["ci_low"] <= stats["mean_diff"] <= stats["ci_high"]
    # The parent comparison exists where the parent is not the baseline.
    parents = {(c["config"], c["reference"]) for c in doc["comparisons"] if c["kind"] == "parent"}
    assert ("hybrid-mean2", "hybrid-best") in parents
    # Mean differences are differences of the configurations' means.
    for c in base:
        diff = doc["metrics"][c["config"]]["mrr@10"] - doc["metrics"]["semantic-best"]["mrr@10"]
        assert c["metrics"]["mrr@10"]["mean_diff"] == pytest.approx(diff, abs=1e-5)


def test_outputs_json_markdown_png(doc: dict[str, Any], tmp_path: Path) -> None:
    written = write_outputs(doc, tmp_path / "out" / "eval.json")
    loaded = json.loads(written["json"].read_text())
    assert loaded["schema_version"] == 1
    assert {"meta", "protocols", "baseline", "configs", "metrics", "comparisons",
            "per_query", "skipped"} <= set(loaded)
    table = written["markdown"].read_text()
    assert table == to_markdown(doc)
    for name in DEFAULT_NAMES:
        assert f"| {name} |" in table or f"| **{name}** |" in table
    assert "95% CI" in table
    assert "| hybrid-best-knee | hybrid-best |" in table
    assert "| hybrid-best-mmr | hybrid-best |" in table and "Redundancy@5" in table
    png = written["png"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 10_000


def test_state_is_reused_until_the_dump_changes(
    eval_settings: Any, eval_dump: Path, minilm: Any
) -> None:
    with pytest.raises(StateNotReady):
        prepare_state(eval_settings, eval_dump, embedder=minilm, build=False).close()
    first = prepare_state(eval_settings, eval_dump, embedder=minilm, progress=False)
    first.close()
    assert not first.reused and first.embedded == {1: 24}
    again = prepare_state(eval_settings, eval_dump, embedder=minilm, build=False)
    again.close()
    assert again.reused and again.imported is None
    assert again.database == first.database and again.fingerprints == first.fingerprints
    # Another forum (one more post) is another database, imported and embedded anew.
    with (eval_dump / "posts.jsonl").open("a") as handle:
        handle.write(json.dumps({"id": 500, "topic_id": 1, "post_number": 4, "user_id": 2,
                                 "username": "bob", "created_at": "2026-01-03T10:00:00Z",
                                 "raw": "HSBC also works.", "post_type": 1}) + "\n")
    changed = prepare_state(eval_settings, eval_dump, embedder=minilm, progress=False)
    changed.close()
    assert changed.database != first.database and not changed.reused
    assert changed.embedded == {1: 25}


def test_judgements_do_not_change_the_state(
    eval_settings: Any, tmp_path: Path, minilm: Any
) -> None:
    dump = write_eval_dump(tmp_path / "a")
    first = prepare_state(eval_settings, dump, embedder=minilm, progress=False)
    first.close()
    (dump / "qrels_post.tsv").write_text("query_id\tpost_id\tgrade\n")
    second = prepare_state(eval_settings, dump, embedder=minilm, progress=False)
    second.close()
    assert second.reused and second.database == first.database


# Words of the beach topic's three posts (ids 4, 5, 6), each with its own score.
BEACH_WORDS = {"turtles": 9.0, "beach": 7.0, "sea": 5.0}
BEACH_POSTS = {4: "sea", 5: "beach", 6: "turtles"}


class KeywordReranker:
    """A deterministic scorer with the Reranker protocol: beach words score high."""

    name = "keyword-test-scorer"
    provider = "cpu"

    def score(self, query: str, passages: Sequence[str]) -> npt.NDArray[np.float32]:
        def one(text: str) -> float:
            words = set(text.lower().replace(".", " ").replace("?", " ").split())
            return max([v for w, v in BEACH_WORDS.items() if w in words], default=-1.0)
        return np.asarray([one(p) for p in passages], dtype=np.float32)


def test_rerank_stage_reorders_the_head_and_links_the_best_scored_post(
    eval_settings: Any, eval_dump: Path, minilm: Any
) -> None:
    state = prepare_state(eval_settings, eval_dump, embedder=minilm, progress=False,
                          reranker=KeywordReranker())
    try:
        res = state.resources
        topics = res.search.find_topics("bank account salary", 8, SearchOptions()).topics
        assert topics[0].topic_id != 2 and 2 in {t.topic_id for t in topics}
        stage = CrossEncoderRerank(res, candidates=8)
        reranked = stage.apply("bank account salary", topics)
        assert reranked[0].topic_id == 2  # the beach topic, whatever the first stage said
        assert sorted(t.topic_id for t in reranked) == sorted(t.topic_id for t in topics)
        # The linked post is the one the scorer liked best among the posts it was shown.
        shown = [p.post_id for p in next(t for t in topics if t.topic_id == 2).posts[:2]]
        best = max(shown, key=lambda pid: BEACH_WORDS[BEACH_POSTS[pid]])
        assert reranked[0].best.post_id == best
        assert reranked[0].score == BEACH_WORDS[BEACH_POSTS[best]]
        # Beyond the head, the first-stage order is kept.
        short = CrossEncoderRerank(res, candidates=2).apply("bank account salary", topics)
        assert [t.topic_id for t in short[2:]] == [t.topic_id for t in topics[2:]]
    finally:
        state.close()


def test_rerank_configurations_run_with_a_real_cross_encoder(
    eval_settings: Any, eval_dump: Path, minilm: Any, tmp_path: Path
) -> None:
    from models import load_reranker, make_tiny_cross_encoder

    make_tiny_cross_encoder(tmp_path / "ce", seed=3)
    reranker = load_reranker(tmp_path / "ce")
    doc = run_evaluation(eval_settings, eval_dump, embedder=minilm, reranker=reranker,
                         config_names=["semantic-best", "semantic-best-rerank"],
                         resamples=200, progress=False)
    assert [c["name"] for c in doc["configs"]] == ["semantic-best", "semantic-best-rerank"]
    assert doc["meta"]["reranker"] == reranker.name
    base = {r["query_id"]: r for r in doc["per_query"]["semantic-best"]}
    for row in doc["per_query"]["semantic-best-rerank"]:
        assert sorted(row["protocol_b_ranking"]) == sorted(base[row["query_id"]]
                                                           ["protocol_b_ranking"])
        assert PRIVATE_TOPIC not in row["top_topics"]


def test_a_fresh_state_directory_gets_its_model_first(eval_settings: Any,
                                                      eval_dump: Path) -> None:
    # `sidecar bench --part scale` on a new state directory: the evaluation pins the model's
    # folder, which must then be prepared before it is pinned.
    settings = eval_settings.model_copy(update={"embed_model_path": None})
    assert not (settings.embed_dir() / "manifest.json").exists()
    state = prepare_state(settings, eval_dump, progress=False)
    state.close()
    assert (settings.embed_dir() / "manifest.json").is_file()
    assert state.embedded == {1: 24}
