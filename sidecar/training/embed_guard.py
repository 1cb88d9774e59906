"""The embedder's promotion guard: the forum's own judged questions, asked of both models.

The questions the forum's people judged (moderators' labels naming the topic that answers,
search terms whose result enough distinct members opened: :func:`forum_judgements`) whose topic
the new model never read (held out when it trained, :mod:`sidecar.training.embed_source`) are
asked of the served search twice: once with the served model's query vector over its own
vectors, once with the new model's over its own. Per question, the reciprocal rank of the judged
topic among the first ten; the paired bootstrap CI of the mean difference decides. Fewer than
:data:`MIN_JUDGED` such questions is no evidence: promotion is then the operator's explicit
choice.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from sidecar.evaluation.metrics import paired_bootstrap_ci
from sidecar.search.service import SearchOptions, SearchService
from sidecar.training.guard import MIN_JUDGED

DEPTH = 10  # topics read per question (MRR@10)


@dataclass(frozen=True)
class EmbedVerdict:
    """What the guard measured and decided; ``evidence`` False: too few judged questions."""

    promote: bool
    evidence: bool
    reason: str
    figures: dict[str, Any]


def held_out_questions(judged: Sequence[tuple[str, int]], held_topics: Collection[int]
                       ) -> list[tuple[str, int]]:
    """The judged (question, topic) pairs whose topic the new model never trained on."""
    held = frozenset(held_topics)
    return [(q, t) for q, t in judged if t in held]


def reciprocal_rank(ranked: Sequence[int], topic: int) -> float:
    """1 / the rank of ``topic`` among ``ranked`` (cut at :data:`DEPTH`), else 0."""
    for rank, found in enumerate(ranked[:DEPTH], start=1):
        if found == topic:
            return 1.0 / rank
    return 0.0


def ask_both(questions: Sequence[tuple[str, int]], served: SearchService, new: SearchService
             ) -> tuple[list[float], list[float]]:
    """Per question, the judged topic's reciprocal rank with the served search and with the
    same search on the new model (each model's query vector over its own vectors)."""
    def ranks(service: SearchService) -> list[float]:
        out = []
        for question, topic in questions:
            found = service.find_topics(question, DEPTH, SearchOptions(), link=0).topics
            out.append(reciprocal_rank([t.topic_id for t in found], topic))
        return out
    return ranks(new), ranks(served)


def judge_embedder(new_rr: Sequence[float], served_rr: Sequence[float], *, served_name: str,
                   new_name: str, resamples: int = 2000, seed: int = 0) -> EmbedVerdict:
    """Decide from the per-question reciprocal ranks of both models."""
    figures: dict[str, Any] = {"questions": len(new_rr), "depth": DEPTH,
                               "scorers": {"new": new_name, "served": served_name}}
    if len(new_rr) < MIN_JUDGED:
        return EmbedVerdict(False, False, f"{len(new_rr)} judged questions on topics the new "
                            f"model never read, fewer than the {MIN_JUDGED} evidence needs: "
                            "promoting it is the operator's explicit choice (--force)",
                            figures)
    diff, low, high = paired_bootstrap_ci(list(new_rr), list(served_rr), resamples=resamples,
                                          seed=seed)
    figures["mrr"] = {"new": round(float(np.mean(new_rr)), 4),
                      "served": round(float(np.mean(served_rr)), 4),
                      "difference": round(diff, 4), "ci": [round(low, 4), round(high, 4)]}
    told = (f"judged MRR@{DEPTH} {np.mean(new_rr):.3f} against {np.mean(served_rr):.3f} for "
            f"{served_name} ({diff:+.3f}, 95% CI [{low:+.3f}, {high:+.3f}], "
            f"{len(new_rr)} questions)")
    if low > 0:
        return EmbedVerdict(True, True, told, figures)
    return EmbedVerdict(False, True, f"{told}: not better beyond chance, not promoted", figures)
