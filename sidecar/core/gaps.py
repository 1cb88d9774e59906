"""The content gaps: unanswered questions grouped into subjects by their embeddings (pure).

The moderators' gap view (``GET /v1/moderation/gaps``) reads the questions the forum did not
answer (their query's vector, kept at ask time) and groups those that ask about the same thing.
Grouping is scikit-learn's agglomerative clustering with **average linkage over cosine
distance**, cut at ``1 - similarity``: two groups merge while their questions are, on average,
at least ``similarity`` alike. No number of groups is guessed; one question alone is a group.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Generic, TypeVar

import numpy as np

Q = TypeVar("Q")


@dataclass(frozen=True)
class GapGroup(Generic[Q]):
    """One subject: its questions, newest first."""

    questions: list[Q]
    last_asked: datetime

    @property
    def count(self) -> int:
        """How many times the subject was asked in the period."""
        return len(self.questions)


def group_labels(vectors: Sequence[Sequence[float]], similarity: float) -> list[int]:
    """A group number per vector: average-linkage clusters at cosine ``similarity``.

    Vectors of another length than the first, or of zero norm, cannot be compared: each is a
    group of its own.
    """
    n = len(vectors)
    if n == 0:
        return []
    dims = len(vectors[0])
    usable = [i for i, v in enumerate(vectors) if len(v) == dims]
    matrix = np.asarray([vectors[i] for i in usable], dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) if len(usable) else np.zeros(0)
    ok = [i for i, norm in zip(usable, norms, strict=True) if norm > 0]
    labels = [-1] * n
    if len(ok) >= 2:
        # A heavy dependency (scipy under it), loaded only when a moderator opens the gaps.
        from sklearn.cluster import AgglomerativeClustering

        rows = np.asarray([vectors[i] for i in ok], dtype=np.float64)
        rows /= np.linalg.norm(rows, axis=1, keepdims=True)
        model = AgglomerativeClustering(n_clusters=None, metric="cosine", linkage="average",
                                        distance_threshold=max(1e-9, 1.0 - similarity))
        for i, label in zip(ok, model.fit_predict(rows), strict=True):
            labels[i] = int(label)
    elif ok:
        labels[ok[0]] = 0
    next_label = max(labels, default=-1) + 1
    for i in range(n):  # the ones that could not be compared stand alone
        if labels[i] == -1:
            labels[i] = next_label
            next_label += 1
    return labels


def group_questions(questions: Sequence[Q], vectors: Sequence[Sequence[float]],
                    asked: Sequence[datetime], similarity: float) -> list[GapGroup[Q]]:
    """The questions grouped into subjects: groups by count (then the most recently asked
    first), the questions of a group newest first."""
    if not len(questions) == len(vectors) == len(asked):
        raise ValueError("questions, vectors and times must have the same length")
    members: dict[int, list[int]] = {}
    for i, label in enumerate(group_labels(vectors, similarity)):
        members.setdefault(label, []).append(i)
    groups = []
    for indices in members.values():
        indices.sort(key=lambda i: asked[i], reverse=True)
        groups.append(GapGroup([questions[i] for i in indices], asked[indices[0]]))
    groups.sort(key=lambda g: (-g.count, -g.last_asked.timestamp()))
    return groups
