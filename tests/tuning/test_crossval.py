"""Cross-validation of the tuner's choice, judgement sources and the refusal rule (pure)."""

from __future__ import annotations

import numpy as np
import pytest

from sidecar.cli import tune as tune_cli
from sidecar.core.searchconfig import SearchConfig
from sidecar.core.types import Mode
from sidecar.db.judgements_read import ClickRow, LabelRow
from sidecar.errors import InvalidInput
from sidecar.tuning import judgements as jm
from sidecar.tuning.crossval import best_candidate, cross_validate, kfold
from sidecar.tuning.scoring import ScoreTable
from sidecar.tuning.space import candidates
from sidecar.tuning.tune import MIN_QUERIES, check_enough, reference_candidates, tune


def test_kfold_partitions_every_query_once() -> None:
    folds = kfold(23, 5, seed=3)
    assert len(folds) == 5
    flat = sorted(i for f in folds for i in f)
    assert flat == list(range(23))
    assert {len(f) for f in folds} <= {4, 5}
    assert kfold(23, 5, seed=3) == folds and kfold(23, 5, seed=4) != folds
    with pytest.raises(ValueError):
        kfold(3, 5)


def test_best_candidate_breaks_ties_by_secondary_then_order() -> None:
    primary = np.array([[1.0, 0.0], [0.5, 0.5], [0.5, 0.5]])
    secondary = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]])
    w = np.ones(2)
    assert best_candidate(primary, secondary, w, [0, 1]) == 2
    assert best_candidate(primary, np.zeros((3, 2)), w, [0, 1]) == 0  # first of the tied
    assert best_candidate(primary, secondary, w, [0]) == 0


def test_held_out_scores_never_use_the_query_for_the_choice() -> None:
    # Candidate 1 is perfect on query 0 only and terrible elsewhere; candidate 0 is decent on
    # all. In-sample, query 0 would pull toward 1; held out, query 0 sees candidate 0's score.
    primary = np.array([[0.5, 0.5, 0.5, 0.5], [1.0, 0.0, 0.0, 0.0]])
    cv = cross_validate(primary, primary, np.ones(4), [[0], [1], [2], [3]])
    assert cv.chosen == [0, 0, 0, 0]
    assert list(cv.held_out_scores(primary)) == [0.5, 0.5, 0.5, 0.5]


def test_weights_move_the_choice() -> None:
    primary = np.array([[1.0, 0.0], [0.0, 1.0]])
    assert cross_validate(primary, primary, np.array([3.0, 1.0]), [[0], [1]]).final == 0
    assert cross_validate(primary, primary, np.array([1.0, 3.0]), [[0], [1]]).final == 1


def test_space_starts_with_single_legs_and_holds_the_default() -> None:
    space = candidates()
    assert space[0].config == SearchConfig(Mode.SEMANTIC)
    assert space[1].config == SearchConfig(Mode.KEYWORD)
    names = [c.name for c in space]
    assert len(names) == len(set(names))
    refs = reference_candidates(SearchConfig(), space)
    assert refs["default"].name == "rrf-k60" and refs["semantic"].name == "semantic"


def _table(values: dict[str, list[float]]) -> ScoreTable:
    cands = [c for c in candidates() if c.name in values]
    queries = [jm.Judged(id=str(i), text=f"q{i}", topics={1: 1}, source="qrels")
               for i in range(len(next(iter(values.values()))))]
    arr = np.array([values[c.name] for c in cands])
    return ScoreTable(candidates=cands, queries=queries,
                      scores={"mrr@10": arr, "hit@1": arr, "hit@5": arr, "ndcg@10": arr})


def test_tune_falls_back_to_the_best_leg_when_fusion_does_not_pay() -> None:
    rng = np.random.default_rng(0)
    semantic = list(rng.uniform(0.4, 1.0, 60))
    fused = [s - 0.05 for s in semantic]  # always a little worse
    table = _table({"semantic": semantic, "keyword": [0.1] * 60, "rrf-k60": fused})
    refs = {"semantic": table.candidates[0], "keyword": table.candidates[1],
            "default": table.candidates[2]}
    result = tune(table, refs, folds=5, resamples=500)
    assert result.served.config == SearchConfig(Mode.SEMANTIC)
    assert result.fallback is None or "semantic" in result.fallback


def test_tune_serves_fusion_when_it_pays_held_out() -> None:
    rng = np.random.default_rng(1)
    semantic = list(rng.uniform(0.3, 0.8, 60))
    fused = [min(1.0, s + 0.15) for s in semantic]
    table = _table({"semantic": semantic, "keyword": [0.1] * 60, "rrf-k60": fused})
    refs = {"semantic": table.candidates[0], "keyword": table.candidates[1],
            "default": table.candidates[2]}
    result = tune(table, refs, folds=5, resamples=500)
    assert result.served.name == "rrf-k60" and result.fallback is None
    assert result.comparisons["semantic"]["mrr@10"].ci_low > 0


def test_too_few_judgements_are_refused_with_the_reason() -> None:
    queries = [jm.Judged(id=str(i), text="q", topics={1: 1}, source="labels") for i in range(7)]
    with pytest.raises(InvalidInput, match=r"labels: 7.*7 judged queries, 50 needed"):
        check_enough(queries, 50)
    check_enough(queries, 7)


def test_sources_merge_and_clicks_get_inverse_propensity_weights() -> None:
    labels = jm.from_labels([LabelRow("r1", "wifi  drops", 5), LabelRow("r2", "wifi drops", 6),
                             LabelRow("r3", "visa", 7)])
    assert [(q.text, dict(q.topics)) for q in labels] == [("wifi drops", {5: 1, 6: 1}),
                                                          ("visa", {7: 1})]
    clicks = jm.from_clicks([ClickRow("visa renewal", 7, 3), ClickRow("visa renewal", 9, 1)])
    assert clicks[0].clicked == (7, 9) and clicks[0].weight == 1.0
    ranks = {7: 1, 9: None}
    weighted = jm.with_propensity(labels + clicks, lambda q, t: ranks[t])
    assert [q.weight for q in weighted[:2]] == [1.0, 1.0]  # labels: no position bias
    # Topic 7 was shown first (weight 1); topic 9 was not in the old top 10 (clipped weight 10).
    assert weighted[2].weight == pytest.approx((1 + jm.IPS_CLIP) / 2)
    assert jm.ips_weight(3) == 3 and jm.ips_weight(40) == jm.IPS_CLIP
    assert jm.counts(weighted) == {"qrels": 0, "labels": 2, "search_log": 1}


def test_the_cli_names_the_same_sources_and_threshold_as_the_tuner() -> None:
    assert tune_cli.SOURCES == jm.SOURCES and tune_cli.MIN_QUERIES == MIN_QUERIES
