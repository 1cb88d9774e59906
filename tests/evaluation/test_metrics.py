"""The metrics against small cases computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from sidecar.evaluation import metrics as m

QRELS = {10: 2, 20: 1, 30: 0, 40: 1}  # 50 is unjudged: not relevant


def test_first_relevant_rank_skips_grade_zero_and_unjudged() -> None:
    assert m.first_relevant_rank([50, 30, 20, 10], QRELS) == 3
    assert m.first_relevant_rank([50, 30], QRELS) is None
    # With a stricter threshold only grade 2 counts.
    assert m.first_relevant_rank([20, 40, 10], QRELS, min_grade=2) == 3


def test_hit_at_k() -> None:
    ranking = [50, 30, 20]
    assert m.hit_at(ranking, QRELS, 1) == 0.0
    assert m.hit_at(ranking, QRELS, 2) == 0.0
    assert m.hit_at(ranking, QRELS, 3) == 1.0
    assert m.hit_at([], QRELS, 5) == 0.0


def test_reciprocal_rank_is_cut_at_k() -> None:
    assert m.reciprocal_rank([20], QRELS, 10) == 1.0
    assert m.reciprocal_rank([50, 30, 40], QRELS, 10) == pytest.approx(1 / 3)
    assert m.reciprocal_rank([50, 30, 40], QRELS, 2) == 0.0


def test_ndcg_graded_by_hand() -> None:
    # Ranking 20 (g1), 50 (g0), 10 (g2): DCG = 1/log2(2) + 0 + 2/log2(4) = 1 + 1 = 2.
    # Ideal over all judged grades (2, 1, 1, 0): 2/1 + 1/log2(3) + 1/log2(4) = 3.0 + 1/log2(3).
    ideal = 2.0 + 1 / math.log2(3) + 0.5
    assert m.ndcg_at([20, 50, 10], QRELS, 10) == pytest.approx(2.0 / ideal)
    # The perfect order scores 1, and a cut at k uses the ideal's first k gains too.
    assert m.ndcg_at([10, 20, 40], QRELS, 10) == pytest.approx(1.0)
    assert m.ndcg_at([10], QRELS, 1) == pytest.approx(1.0)
    assert m.ndcg_at([20], QRELS, 1) == pytest.approx(0.5)


def test_ndcg_counts_a_repeated_document_once() -> None:
    assert m.ndcg_at([10, 10, 10], {10: 2}, 3) == pytest.approx(1.0)
    assert m.ndcg_at([10, 10], {10: 2, 20: 2}, 2) < 1.0


def test_ndcg_without_relevant_document_is_zero() -> None:
    assert m.ndcg_at([1, 2], {1: 0}, 10) == 0.0


def test_average_precision_semeval() -> None:
    # Relevant at ranks 2 and 4: (1/2 + 2/4) / 2 = 0.5.
    assert m.average_precision([30, 10, 50, 20], QRELS) == pytest.approx(0.5)
    # All relevant first: 1.0.
    assert m.average_precision([10, 20, 40, 30], QRELS) == pytest.approx(1.0)
    # SemEval divides by relevant documents found within the cut, not by all of them.
    assert m.average_precision([30, 10, 50, 20], QRELS, k=2) == pytest.approx(0.5)
    assert m.average_precision([30, 50], QRELS) == 0.0


def test_wins_losses_ties() -> None:
    assert m.wins_losses([1.0, 0.5, 0.0, 0.2], [0.5, 0.5, 1.0, 0.0]) == (2, 1, 1)
    with pytest.raises(ValueError):
        m.wins_losses([1.0], [1.0, 0.0])


def test_bootstrap_is_deterministic_and_brackets_the_mean() -> None:
    rng = np.random.default_rng(7)
    base = rng.random(100).tolist()
    system = [b + 0.1 + 0.05 * rng.standard_normal() for b in base]
    first = m.paired_bootstrap_ci(system, base, resamples=2000, seed=3)
    again = m.paired_bootstrap_ci(system, base, resamples=2000, seed=3)
    other = m.paired_bootstrap_ci(system, base, resamples=2000, seed=4)
    assert first == again
    assert first != other
    diff, low, high = first
    assert diff == pytest.approx(float(np.mean(np.subtract(system, base))))
    assert low < diff < high
    assert low > 0.08 and high < 0.12  # a clear +0.1 shift is found, and narrowly


def test_bootstrap_ci_contains_zero_for_a_null_difference() -> None:
    rng = np.random.default_rng(1)
    base = rng.random(200).tolist()
    system = list(base)
    system[0], system[1] = base[1], base[0]  # same distribution, two queries swapped
    comp = m.compare(system, base, resamples=1000, seed=0)
    assert comp.ci_low <= 0.0 <= comp.ci_high
    assert not comp.significant
    assert comp.wins + comp.losses + comp.ties == 200


def test_bootstrap_on_many_queries_narrows_the_interval() -> None:
    # Enough queries to be resampled in several chunks: the interval shrinks like 1/sqrt(n).
    rng = np.random.default_rng(2)
    small = m.paired_bootstrap_ci(rng.random(100), rng.random(100), resamples=500, seed=9)
    large = m.paired_bootstrap_ci(rng.random(5000), rng.random(5000), resamples=500, seed=9)
    assert large[1] <= large[0] <= large[2]
    assert (large[2] - large[1]) < (small[2] - small[1]) / 4


def test_compare_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        m.paired_bootstrap_ci([1.0], [1.0], confidence=1.5)
    with pytest.raises(ValueError):
        m.paired_bootstrap_ci([1.0], [1.0], resamples=0)
    assert m.paired_bootstrap_ci([], []) == (0.0, 0.0, 0.0)


def test_redundancy_is_the_mean_pairwise_cosine() -> None:
    assert m.redundancy([[1.0, 0.0]]) is None
    assert m.redundancy([[1.0, 0.0], [2.0, 0.0]]) == pytest.approx(1.0)
    assert m.redundancy([[1.0, 0.0], [0.0, 3.0], [-1.0, 0.0]]) == pytest.approx(-1 / 3)
