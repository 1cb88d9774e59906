"""Reading queries and qrels, the configuration matrix, and protocol B's ordering."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields
from pathlib import Path

import pytest

from sidecar.core.chain import ChainFlags
from sidecar.core.types import FusedPost, TopicHit
from sidecar.errors import InvalidInput
from sidecar.evaluation.configs import BY_NAME, CATALOGUE, EvalConfig, select
from sidecar.evaluation.dataset import (
    forum_digest,
    judgements_digest,
    load_dataset,
    parse_query_fields,
)
from sidecar.evaluation.runner import protocol_b_order
from tests.evaluation.conftest import QUERIES


def test_loads_queries_and_graded_judgements(eval_dump: Path) -> None:
    data = load_dataset(eval_dump)
    assert [q.id for q in data.queries] == [q[0] for q in QUERIES]
    q1 = data.queries[0]
    assert q1.text.startswith("Good bank\n")
    assert q1.topics == {1: 2, 6: 0, 3: 0} and q1.posts == {2: 2, 3: 0}
    assert [q.id for q in data.scored()] == ["Q1", "Q2", "Q3", "Q4"]
    assert data.has_post_qrels


def test_post_qrels_are_optional(eval_dump: Path) -> None:
    (eval_dump / "qrels_post.tsv").unlink()
    data = load_dataset(eval_dump)
    assert not data.has_post_qrels and data.queries[0].posts == {}


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda d: (d / "qrels_topic.tsv").unlink(), "missing qrels_topic.tsv"),
    (lambda d: (d / "queries.jsonl").write_text('{"id": "Q1"}\n'), "queries.jsonl:1"),
    (lambda d: (d / "queries.jsonl").write_text("not json\n"), "queries.jsonl:1"),
    (lambda d: (d / "qrels_topic.tsv").write_text("h\nQ1\t1\tgood\n"), "qrels_topic.tsv:2"),
    (lambda d: (d / "qrels_topic.tsv").write_text("h\nQ1\t1\t-1\n"), "grade must be >= 0"),
    (lambda d: (d / "qrels_topic.tsv").write_text("h\nQ1\t1\n"), "3 tab-separated"),
    (lambda d: (d / "qrels_topic.tsv").write_text("h\nQ1\t1\t2\nQ1\t1\t0\n"), "judged twice"),
    (lambda d: (d / "qrels_topic.tsv").write_text("h\nQX\t1\t2\nQ1\t1\t2\n"), "unknown queries"),
    (lambda d: (d / "qrels_topic.tsv").write_text("h\nQ1\t1\t0\n"), "no query has a relevant"),
])
def test_bad_dumps_are_refused_with_file_and_line(
    eval_dump: Path, mutate: Callable[[Path], object], message: str
) -> None:
    mutate(eval_dump)
    with pytest.raises(InvalidInput) as err:
        load_dataset(eval_dump)
    assert message in err.value.message


def test_digests_separate_the_forum_from_the_judgements(eval_dump: Path) -> None:
    forum, judged = forum_digest(eval_dump), judgements_digest(eval_dump)
    (eval_dump / "qrels_topic.tsv").write_text("query_id\ttopic_id\tgrade\nQ1\t1\t2\n")
    assert forum_digest(eval_dump) == forum and judgements_digest(eval_dump) != judged
    with (eval_dump / "topics.jsonl").open("a") as handle:
        handle.write("\n")
    assert forum_digest(eval_dump) != forum


FACTORS = ("mode", "topic_score", "strategy", "fusion", "index_kind", "stages", "chain",
           "keyword")


def _factor(config: EvalConfig, name: str) -> object:
    if name == "keyword":  # how the keyword leg reads a question: one factor of two settings
        return config.keyword_question_words, config.keyword_max_words
    value = getattr(config, name)
    return (value or ChainFlags()) if name == "chain" else value  # None = every stage off


def test_each_configuration_changes_exactly_one_factor_of_its_parent() -> None:
    assert {f.name for f in fields(EvalConfig)} >= set(FACTORS) - {"keyword"}
    for config in CATALOGUE:
        if config.parent is None:
            continue
        parent = BY_NAME[config.parent]
        changed = [f for f in FACTORS if _factor(config, f) != _factor(parent, f)]
        assert len(changed) == 1, (config.name, changed)
        assert config.factor


def test_select_defaults_skip_unavailable_stages_and_put_the_baseline_first() -> None:
    matrix = select([], "semantic-best", available_stages=[])
    names = [c.name for c in matrix.configs]
    assert names[0] == "semantic-best"
    assert "semantic-best-rerank" not in names and "semantic-best-rerank" in matrix.skipped
    assert "semantic-s2" not in names  # not in the default matrix: a second embedding pass
    assert matrix.strategies == {1} and "binary" in matrix.index_kinds
    with_rerank = select([], "semantic-best", available_stages=["rerank"])
    assert "hybrid-best-rerank" in [c.name for c in with_rerank.configs]
    assert not with_rerank.skipped


def test_select_explicit_names() -> None:
    matrix = select(["hybrid-best", "semantic-s2"], "semantic-best")
    assert [c.name for c in matrix.configs] == ["semantic-best", "hybrid-best", "semantic-s2"]
    assert matrix.strategies == {1, 2}
    with pytest.raises(InvalidInput, match="SIDECAR_RERANK_MODEL_PATH"):
        select(["hybrid-best-rerank"], "semantic-best", available_stages=[])
    with pytest.raises(InvalidInput, match="unknown configuration"):
        select(["nope"], "semantic-best")
    with pytest.raises(InvalidInput, match="unknown configuration"):
        select([], "nope")


def _hit(topic_id: int) -> TopicHit:
    return TopicHit(topic_id, 1.0, (FusedPost(topic_id * 10, topic_id, 1.0),))


def test_protocol_b_keeps_the_deep_order_and_appends_the_rest_by_id() -> None:
    from sidecar.evaluation.dataset import EvalQuery

    query = EvalQuery(id="Q", text="t", split=None, topics={5: 1, 3: 0, 9: 2, 1: 0})
    deep = [_hit(7), _hit(9), _hit(2), _hit(3)]
    ranked, unranked = protocol_b_order(query, deep)
    assert [t.topic_id for t in ranked] == [9, 3]
    assert unranked == [1, 5]


def test_query_fields_pick_the_query_and_its_details(eval_dump: Path) -> None:
    assert parse_query_fields("text") == ("text", None)
    assert parse_query_fields("subject+body") == ("subject", "body")
    for bad in ("", "+body", "subject+"):
        with pytest.raises(InvalidInput):
            parse_query_fields(bad)
    flat = {q.id: q for q in load_dataset(eval_dump).queries}
    titled = {q.id: q for q in load_dataset(eval_dump, "subject+body").queries}
    assert flat["Q1"].details is None and flat["Q1"].text.startswith("Good bank\n")
    assert (titled["Q1"].text, titled["Q1"].details) == (
        "Good bank", "Which bank should I choose for my salary account?")
    assert titled["Q1"].topics == flat["Q1"].topics


def test_a_configuration_sets_only_the_settings_it_names() -> None:
    # The old question reading overrides both keyword settings; the others leave them as set.
    assert BY_NAME["hybrid-operators"].settings_update() == {
        "index_kind": "halfvec", "keyword_question_words": 0, "keyword_max_words": 0}
    assert BY_NAME["hybrid-best"].settings_update() == {"index_kind": "halfvec"}
    assert BY_NAME["semantic-binary"].settings_update() == {"index_kind": "binary"}
