"""The deterministic rerank chain over aggregated topics: MMR diversity, then metadata boosts.

Pure (no I/O): the caller loads each candidate's :class:`TopicFeatures` and its best post's
vector, and this module reorders. Every stage is scale-free, because the fused score's scale
depends on the fusion method (RRF ~0.03, z-scores around 0, min-max in [0, 1]):

- **MMR** (Carbonell & Goldstein, 1998) takes relevance as the fused score min-max normalised
  within the candidate list, and redundancy as the cosine between the topics' best posts;
- **boosts** work on ranks: a topic's metadata signal in [-1, 1] moves it at most
  ``boost_positions`` ranks past topics scored differently, and past any topic scored the same
  (a bounded tie-breaker: it reorders topics the fusion could not separate, never a weak match
  far above a strong one).

Stages run in a fixed order, MMR then boosts, so the boosts are the last, bounded nudge. The
chain never adds, drops or edits a topic (the knee cut-off, :mod:`sidecar.core.knee`, applies to
the evidence of ``/v1/retrieve`` only). With every flag off it returns its input unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import IntEnum
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from sidecar.core.chain_flags import MAX_CANDIDATES, ChainFlags
from sidecar.core.types import TopicHit

__all__ = ["MAX_CANDIDATES", "PRIORITY_SIGNAL", "ChainFlags", "SearchPriority", "Signals",
           "TopicFeatures", "apply_chain", "boost", "boost_signal", "mmr", "normalised_scores",
           "signals", "tied_ranks", "unit_vectors"]



class SearchPriority(IntEnum):
    """A category's ``search_priority`` (Discourse ``Searchable::PRIORITIES``).

    Discourse's full-page search leaves ``IGNORE`` categories out, sorts ``VERY_HIGH`` topics
    before and ``VERY_LOW`` after all others, and multiplies the text rank by the site settings
    ``category_search_priority_low_weight`` (0.8) / ``_high_weight`` (1.2) for ``LOW`` / ``HIGH``.
    """

    NORMAL = 0
    IGNORE = 1
    VERY_LOW = 2
    LOW = 3
    HIGH = 4
    VERY_HIGH = 5


# The category signal of each priority, in [-1, 1]. The chain never drops a topic, so IGNORE
# (left out by Discourse) is demoted as much as VERY_LOW; an unknown value counts as NORMAL.
PRIORITY_SIGNAL: dict[int, float] = {
    SearchPriority.NORMAL: 0.0, SearchPriority.IGNORE: -1.0, SearchPriority.VERY_LOW: -1.0,
    SearchPriority.LOW: -0.5, SearchPriority.HIGH: 0.5, SearchPriority.VERY_HIGH: 1.0,
}


@dataclass(frozen=True, slots=True)
class TopicFeatures:
    """What a stock Discourse knows about a topic (and its best post) that may earn a boost.

    ``None`` means unknown (the column or table does not exist on this forum): neutral.
    """

    topic_id: int
    accepted_answer_post_id: int | None = None
    topic_like_count: int = 0
    post_like_count: int = 0  # likes of the topic's best post (the one the result links to)
    created_at: datetime | None = None
    last_posted_at: datetime | None = None
    post_created_at: datetime | None = None
    search_priority: int = SearchPriority.NORMAL
    closed: bool = False
    archived: bool = False


Vector = npt.NDArray[np.floating[Any]]


def apply_chain(
    topics: Sequence[TopicHit],
    flags: ChainFlags,
    features: Mapping[int, TopicFeatures],
    vectors: Mapping[int, Vector],
    query_vector: Vector | None,
    now: datetime,
) -> list[TopicHit]:
    """The topics (best first) reordered by the enabled stages, MMR then boosts.

    ``features`` is keyed by topic id, ``vectors`` by post id (each topic's best post);
    missing entries are neutral. Only the first :data:`MAX_CANDIDATES` topics move.
    """
    head, tail = list(topics[:MAX_CANDIDATES]), list(topics[MAX_CANDIDATES:])
    if flags.mmr:
        head = mmr(head, vectors, flags.mmr_lambda,
                   query_vector if flags.mmr_query_residual else None, flags.mmr_depth)
    if flags.boosts:
        head = boost(head, features, flags, now)
    return head + tail


def normalised_scores(topics: Sequence[TopicHit]) -> npt.NDArray[np.float64]:
    """Fused scores min-max normalised within the list (all 1.0 when they are equal)."""
    scores = np.array([t.score for t in topics], dtype=np.float64)
    if scores.size == 0:
        return scores
    low, high = float(scores.min()), float(scores.max())
    if not math.isfinite(high - low) or high - low <= 0.0:
        return np.ones_like(scores)
    return (scores - low) / (high - low)


def unit_vectors(
    topics: Sequence[TopicHit], vectors: Mapping[int, Vector], query: Vector | None = None
) -> npt.NDArray[np.float32]:
    """The topics' best-post vectors as unit rows (a zero row where a vector is missing).

    With ``query``, each vector first loses its component along the query: two posts that are
    both close to the query are then redundant only in what they say beyond it.
    """
    dims = next((len(v) for v in vectors.values()), 0)
    matrix = np.zeros((len(topics), dims), dtype=np.float32)
    for i, topic in enumerate(topics):
        vector = vectors.get(topic.best.post_id)
        if vector is not None:
            matrix[i] = vector
    if query is not None and dims:
        q = np.asarray(query, dtype=np.float32)
        norm = float(np.linalg.norm(q))
        if norm > 0.0:
            q = q / norm
            matrix -= np.outer(matrix @ q, q)
    norms = np.linalg.norm(matrix, axis=1)
    matrix /= np.where(norms > 0.0, norms, 1.0)[:, None]
    return matrix


def mmr(
    topics: Sequence[TopicHit], vectors: Mapping[int, Vector], lam: float,
    query: Vector | None = None, depth: int = MAX_CANDIDATES,
) -> list[TopicHit]:
    """Greedy maximal marginal relevance for the first ``depth`` places.

    next = argmax lam * relevance - (1 - lam) * redundancy, where redundancy is the highest
    cosine (floored at 0) to a topic already placed. Places beyond ``depth`` keep the input
    order. Ties go to the earlier topic, so ``lam = 1`` keeps the input order. Each place costs
    one matrix-vector product (O(k * d)), so ``depth`` places cost O(depth * k * d), not k^2 * d.
    """
    n = len(topics)
    if n < 2 or lam >= 1.0:
        return list(topics)
    relevance = lam * normalised_scores(topics)
    unit = unit_vectors(topics, vectors, query)
    redundancy = np.zeros(n, dtype=np.float64)
    placed = np.zeros(n, dtype=bool)
    order: list[int] = []
    for _ in range(min(depth, n)):
        gain = relevance - (1.0 - lam) * redundancy
        gain[placed] = -np.inf
        chosen = int(np.argmax(gain))  # argmax returns the first maximum: stable on ties
        order.append(chosen)
        placed[chosen] = True
        np.maximum(redundancy, unit @ unit[chosen], out=redundancy)
    order += [i for i in range(n) if not placed[i]]
    return [topics[i] for i in order]


def _utc(value: datetime) -> datetime:
    # Discourse stores naive UTC timestamps.
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


class Signals(NamedTuple):
    """A topic's metadata signals, each in [-1, 1] (0 = neutral)."""

    accepted: float  # 1: the linked post is the accepted answer; 0.5: another post is
    likes: float  # log-damped likes, 1 at ``boost_likes_saturation``
    recency: float  # 0.5 ** (age / half-life) of the linked post (else the topic's activity)
    category: float  # PRIORITY_SIGNAL of the category's search priority
    closed: float  # -1 archived, -0.5 closed


def signals(f: TopicFeatures, best_post_id: int, flags: ChainFlags, now: datetime) -> Signals:
    """Each metadata signal of a topic (``now`` timezone-aware or naive UTC)."""
    accepted = 0.0
    if f.accepted_answer_post_id is not None:
        accepted = 1.0 if f.accepted_answer_post_id == best_post_id else 0.5
    # Likes of the linked post count fully, the topic's other likes half; log-damped.
    likes = max(0, f.post_like_count) + 0.5 * max(0, f.topic_like_count - f.post_like_count)
    liked = min(1.0, math.log1p(likes) / math.log1p(flags.boost_likes_saturation))
    when = f.post_created_at or f.last_posted_at or f.created_at
    recency = 0.0
    if when is not None:
        age_days = max(0.0, (_utc(now) - _utc(when)).total_seconds() / 86400.0)
        recency = 0.5 ** (age_days / flags.boost_half_life_days)
    closed = -1.0 if f.archived else (-0.5 if f.closed else 0.0)
    return Signals(accepted, liked, recency, PRIORITY_SIGNAL.get(f.search_priority, 0.0), closed)


def boost_signal(f: TopicFeatures | None, best_post_id: int, flags: ChainFlags,
                 now: datetime) -> float:
    """The weighted sum of a topic's signals, clipped to [-1, 1] (0 without features)."""
    if f is None:
        return 0.0
    s = signals(f, best_post_id, flags, now)
    total = (flags.boost_accepted * s.accepted + flags.boost_likes * s.likes
             + flags.boost_recency * s.recency + flags.boost_category * s.category
             + flags.boost_closed * s.closed)
    return max(-1.0, min(1.0, total))


def tied_ranks(topics: Sequence[TopicHit]) -> list[float]:
    """Each topic's position (0-based), runs of equal consecutive scores sharing their mean.

    Topics the fusion scored the same have no order worth keeping: any boost separates them.
    """
    ranks: list[float] = []
    start = 0
    for i in range(1, len(topics) + 1):
        if i == len(topics) or not math.isclose(topics[i].score, topics[start].score,
                                                rel_tol=1e-9, abs_tol=0.0):
            ranks += [(start + i - 1) / 2.0] * (i - start)
            start = i
    return ranks


def boost(
    topics: Sequence[TopicHit], features: Mapping[int, TopicFeatures], flags: ChainFlags,
    now: datetime,
) -> list[TopicHit]:
    """Bounded rank tie-breaker: sort by ``rank - boost_positions * signal`` (stable).

    ``rank`` is the position in the list, shared by a run of equal scores, so a boosted topic
    passes every topic scored the same and at most ``2 * boost_positions`` others (when it is
    boosted to +1 and they are demoted to -1), whatever the scale of the fusion's scores.
    """
    keyed = []
    now = _utc(now)
    for position, (rank, topic) in enumerate(zip(tied_ranks(topics), topics, strict=True)):
        signal = boost_signal(features.get(topic.topic_id), topic.best.post_id, flags, now)
        keyed.append((rank - flags.boost_positions * signal, position, topic))
    keyed.sort(key=lambda item: (item[0], item[1]))
    return [topic for _, _, topic in keyed]
