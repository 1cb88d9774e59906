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
from typing import Any

import numpy as np
import numpy.typing as npt

from sidecar.core.chain_flags import MAX_CANDIDATES, ChainFlags
from sidecar.core.types import TopicHit

__all__ = ["MAX_CANDIDATES", "PRIORITY_SIGNAL", "SIGNALS", "ChainFlags", "SearchPriority",
           "TopicFeatures", "apply_chain", "boost", "boost_signal", "boost_signals",
           "boost_window", "mmr",
           "normalised_scores", "signal_matrix", "tied_ranks", "unit_vectors"]



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
    accepted_answer_post_id: int | None = None  # the newest accepted answer
    topic_like_count: int = 0
    post_like_count: int = 0  # likes of the topic's best post (the one the result links to)
    created_at: datetime | None = None
    last_posted_at: datetime | None = None
    post_created_at: datetime | None = None
    search_priority: int = SearchPriority.NORMAL
    closed: bool = False
    archived: bool = False
    # Every accepted answer, newest first (discourse-solved accepts several since 2026-04);
    # empty: only ``accepted_answer_post_id`` is known.
    accepted_answer_post_ids: tuple[int, ...] = ()

    def is_accepted(self, post_id: int) -> bool:
        """Whether ``post_id`` is one of the topic's accepted answers."""
        return post_id == self.accepted_answer_post_id or post_id in self.accepted_answer_post_ids


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
                   query_vector if flags.mmr_query_residual else None, flags.mmr_depth,
                   flags.mmr_pool)
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
    query: Vector | None = None, depth: int = MAX_CANDIDATES, pool: int = MAX_CANDIDATES,
) -> list[TopicHit]:
    """Greedy maximal marginal relevance among the first ``pool`` topics, for ``depth`` places.

    next = argmax lam * relevance - (1 - lam) * redundancy, where redundancy is the highest
    cosine (floored at 0) to a topic already placed. The rest of the pool, then the topics
    beyond it, keep the input order. Ties go to the earlier topic, so ``lam = 1`` keeps the input
    order. Each place costs one matrix-vector product (O(pool * d)): O(depth * pool * d) in all.
    """
    if len(topics) > pool:
        return mmr(topics[:pool], vectors, lam, query, depth, pool) + list(topics[pool:])
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


# The metadata signals, each in [-1, 1] (0 = neutral), in the columns of signal_matrix:
# accepted: 1 when the linked post is an accepted answer, 0.5 when another post is;
# likes: log-damped, 1 at ``boost_likes_saturation`` (the linked post's likes fully, the topic's
#   other likes half); recency: 0.5 ** (age / half-life) of the linked post (else of the topic's
#   last post, else of the topic); category: PRIORITY_SIGNAL of the category's search priority;
# closed: -1 archived, -0.5 closed.
SIGNALS: tuple[str, ...] = ("accepted", "likes", "recency", "category", "closed")


def signal_matrix(
    features: Sequence[TopicFeatures | None], best_post_ids: Sequence[int], flags: ChainFlags,
    now: datetime,
) -> npt.NDArray[np.float64]:
    """The (n, 5) signals of n topics, columns :data:`SIGNALS`; a zero row without features.

    One pass to gather the fields, then numpy: 300 topics cost well under a millisecond.
    """
    n = len(features)
    accepted = np.zeros(n)
    likes = np.zeros(n)
    age_s = np.full(n, np.nan)
    category = np.zeros(n)
    closed = np.zeros(n)
    now_s = _utc(now).timestamp()
    for i, (f, best) in enumerate(zip(features, best_post_ids, strict=True)):
        if f is None:
            continue
        if f.accepted_answer_post_id is not None or f.accepted_answer_post_ids:
            accepted[i] = 1.0 if f.is_accepted(best) else 0.5
        post = max(0, f.post_like_count)
        likes[i] = post + 0.5 * max(0, f.topic_like_count - post)
        when = f.post_created_at or f.last_posted_at or f.created_at
        if when is not None:
            age_s[i] = max(0.0, now_s - _utc(when).timestamp())
        category[i] = PRIORITY_SIGNAL.get(f.search_priority, 0.0)
        closed[i] = -1.0 if f.archived else (-0.5 if f.closed else 0.0)
    liked = np.minimum(1.0, np.log1p(likes) / math.log1p(flags.boost_likes_saturation))
    half_lives = age_s / (86400.0 * flags.boost_half_life_days)
    recency = np.where(np.isnan(age_s), 0.0, 0.5 ** np.nan_to_num(half_lives))
    return np.column_stack([accepted, liked, recency, category, closed])


def boost_signals(
    features: Sequence[TopicFeatures | None], best_post_ids: Sequence[int], flags: ChainFlags,
    now: datetime,
) -> npt.NDArray[np.float64]:
    """Each topic's weighted sum of signals, clipped to [-1, 1] (0 without features)."""
    weights = np.array([flags.boost_accepted, flags.boost_likes, flags.boost_recency,
                        flags.boost_category, flags.boost_closed])
    matrix = signal_matrix(features, best_post_ids, flags, now)
    return np.clip(matrix @ weights, -1.0, 1.0)


def boost_signal(f: TopicFeatures | None, best_post_id: int, flags: ChainFlags,
                 now: datetime) -> float:
    """One topic's boost signal (see :func:`boost_signals`)."""
    return float(boost_signals([f], [best_post_id], flags, now)[0])


def tied_ranks(topics: Sequence[TopicHit]) -> list[float]:
    """Each topic's position (0-based), runs of equal consecutive scores sharing their mean.

    Topics the fusion scored the same have no order worth keeping: any boost separates them.
    """
    if not topics:
        return []
    scores = np.array([t.score for t in topics], dtype=np.float64)
    starts = np.r_[True, ~np.isclose(scores[1:], scores[:-1], rtol=1e-9, atol=0.0)]
    run = np.cumsum(starts) - 1
    positions = np.arange(len(topics), dtype=np.float64)
    means = np.bincount(run, weights=positions) / np.bincount(run)
    return [float(v) for v in means[run]]


def boost(
    topics: Sequence[TopicHit], features: Mapping[int, TopicFeatures], flags: ChainFlags,
    now: datetime,
) -> list[TopicHit]:
    """Bounded rank tie-breaker: sort by ``rank - boost_positions * signal`` (stable).

    ``rank`` is the position in the list, shared by a run of equal scores, so a boosted topic
    passes every topic scored the same and at most ``2 * boost_positions`` others (when it is
    boosted to +1 and they are demoted to -1), whatever the scale of the fusion's scores.
    """
    if not topics:
        return []
    signal = boost_signals([features.get(t.topic_id) for t in topics],
                           [t.best.post_id for t in topics], flags, now)
    keys = np.array(tied_ranks(topics)) - flags.boost_positions * signal
    order = np.lexsort((np.arange(len(topics)), keys))  # by key, then by position: stable
    return [topics[i] for i in order]


def boost_window(topics: Sequence[TopicHit], positions: float, needed: int | None) -> int:
    """How many leading topics need their features for the first ``needed`` after
    :func:`boost` to be exact (the others may be read as neutral).

    A topic passes another only if its tied rank is less than ``2 * positions`` behind. The
    window, ``needed + 4 * positions + 1`` extended to the end of a run of equal scores, puts
    every topic beyond it at least that far behind each of the first ``needed`` (whose tied rank
    is at most the middle of their run), so none of them can reach the first ``needed``.
    """
    n = min(len(topics), MAX_CANDIDATES)
    if needed is None:
        return n
    window = needed + math.ceil(4 * positions) + 1
    while window < n and math.isclose(topics[window].score, topics[window - 1].score,
                                      rel_tol=1e-9, abs_tol=0.0):
        window += 1
    return min(window, n)
