"""The embedder's guard: judged questions on topics the new model never read, a paired CI."""

from __future__ import annotations

from sidecar.training.embed_guard import (
    MIN_JUDGED,
    held_out_questions,
    judge_embedder,
    reciprocal_rank,
)


def test_only_questions_on_topics_the_model_never_read_count() -> None:
    judged = [("zfs pool", 1), ("wireguard", 2), ("backup", 3)]
    assert held_out_questions(judged, {1, 3}) == [("zfs pool", 1), ("backup", 3)]


def test_the_judged_topic_counts_within_the_first_ten() -> None:
    assert reciprocal_rank([5, 7, 1], 1) == 1 / 3
    assert reciprocal_rank(list(range(20, 40)), 35) == 0.0  # 16th: beyond MRR@10
    assert reciprocal_rank([], 1) == 0.0


def test_too_few_judged_questions_are_no_evidence_whatever_they_say() -> None:
    few = MIN_JUDGED - 1
    verdict = judge_embedder([1.0] * few, [0.0] * few, served_name="a", new_name="b")
    assert not verdict.promote and not verdict.evidence
    assert "explicit choice" in verdict.reason


def test_promoted_only_when_better_beyond_chance() -> None:
    better = judge_embedder([1.0] * 30, [0.5] * 20 + [1.0] * 10, served_name="a", new_name="b")
    assert better.promote and better.evidence and better.figures["mrr"]["ci"][0] > 0
    tied = judge_embedder([1.0, 0.5] * 15, [0.5, 1.0] * 15, served_name="a", new_name="b")
    assert not tied.promote and tied.evidence and "not better beyond chance" in tied.reason
    worse = judge_embedder([0.2] * 30, [1.0] * 30, served_name="a", new_name="b")
    assert not worse.promote and worse.figures["mrr"]["difference"] < 0
