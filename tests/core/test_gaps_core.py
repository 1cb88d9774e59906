"""The content gaps' grouping (pure): average-linkage clusters at a cosine similarity."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sidecar.core.gaps import group_labels, group_questions

T0 = datetime(2026, 12, 1, tzinfo=UTC)


def test_alike_vectors_join_and_others_stay_apart() -> None:
    vectors = [[1.0, 0.0, 0.0], [0.9, 0.1, 0.0], [0.0, 1.0, 0.0], [0.0, 0.95, 0.1],
               [0.0, 0.0, 1.0]]
    labels = group_labels(vectors, similarity=0.8)
    assert labels[0] == labels[1] and labels[2] == labels[3]
    assert len({labels[0], labels[2], labels[4]}) == 3
    # a lower threshold joins more, the lowest everything (cosine of these is 0 at worst)
    assert len(set(group_labels(vectors, similarity=0.01))) == 1


def test_scale_does_not_matter_only_direction() -> None:
    assert group_labels([[1.0, 0.0], [50.0, 1.0], [0.0, 3.0]], 0.9)[:2] == [0, 0]


def test_vectors_that_cannot_be_compared_stand_alone() -> None:
    assert group_labels([], 0.5) == []
    assert group_labels([[1.0, 0.0]], 0.5) == [0]
    labels = group_labels([[1.0, 0.0], [0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.01]], 0.5)
    assert labels[0] == labels[3] and len(set(labels)) == 3


def test_groups_by_count_then_recency_questions_newest_first() -> None:
    questions = ["a1", "b1", "a2", "c1", "a3", "b2"]
    vectors = [[1, 0, 0], [0, 1, 0], [1, 0, 0], [0, 0, 1], [1, 0, 0], [0, 1, 0]]
    asked = [T0 + timedelta(hours=h) for h in (1, 2, 3, 9, 5, 6)]
    groups = group_questions(questions, vectors, asked, similarity=0.5)
    assert [g.questions for g in groups] == [["a3", "a2", "a1"], ["b2", "b1"], ["c1"]]
    assert [g.count for g in groups] == [3, 2, 1]
    assert groups[0].last_asked == asked[4]
    # same count: the most recently asked first
    tied = group_questions(["x", "y"], [[1, 0], [0, 1]], [T0, T0 + timedelta(1)], 0.5)
    assert [g.questions for g in tied] == [["y"], ["x"]]
    with pytest.raises(ValueError):
        group_questions(["x"], [], [T0], 0.5)
