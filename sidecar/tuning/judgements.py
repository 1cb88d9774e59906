"""Judged queries from every source a forum can have, in one shape.

- ``qrels``: an evaluation dump's human judgements (``qrels_topic.tsv``);
- ``labels``: moderators' "should have answered, with topic X" on the review page;
- ``search_log``: Discourse's ``search_logs``, a term and the topic a member opened.

Clicks carry the position bias of the search that showed them: members open what is near the
top, whatever else is relevant. Each click is therefore weighted by the inverse of the
probability that its position was looked at (inverse propensity scoring, Joachims et al. 2017),
with the examination probability of rank r taken as 1/r and the weight clipped, so that a click
on a topic the old search ranked first counts little and one on a topic it ranked eighth counts
more. Discourse does not log the position; it is estimated by running the keyword leg (Discourse's
own search is a keyword search over the same ``post_search_data``) for the term.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from sidecar.db.judgements_read import ClickRow, LabelRow
from sidecar.evaluation.dataset import EvalDataset

Source = Literal["qrels", "labels", "search_log"]
SOURCES: tuple[Source, ...] = ("qrels", "labels", "search_log")

# Clipped inverse propensity: a click at rank r weighs min(r, IPS_CLIP) ** IPS_ETA.
IPS_ETA = 1.0
IPS_CLIP = 10
# Where a clicked topic sits when the keyword search does not find it for the term at all.
UNSEEN_RANK = IPS_CLIP


@dataclass(frozen=True)
class Judged:
    """A query with its relevant topics (grade >= 1), where it came from and its weight."""

    id: str
    text: str
    topics: Mapping[int, int]  # topic id -> grade
    source: Source
    weight: float = 1.0
    clicked: tuple[int, ...] = ()  # search_log only: the clicked topics, for the propensity
    details: str | None = None  # the rest of the question when ``text`` is its title


def from_dataset(dataset: EvalDataset) -> list[Judged]:
    """The dump's judged queries that have at least one relevant topic."""
    return [Judged(id=f"qrels:{q.id}", text=q.text, topics=dict(q.topics), source="qrels",
                   details=q.details) for q in dataset.scored()]


def from_labels(rows: Iterable[LabelRow]) -> list[Judged]:
    """One judged query per retrieval; several labels of the same query text are merged."""
    by_text: dict[str, dict[int, int]] = {}
    for row in rows:
        text = " ".join(row.query.split())
        by_text.setdefault(text, {})[row.topic_id] = 1
    return [Judged(id=f"labels:{i}", text=text, topics=topics, source="labels")
            for i, (text, topics) in enumerate(by_text.items(), start=1)]


def from_clicks(rows: Iterable[ClickRow]) -> list[Judged]:
    """One judged query per search term; every topic opened for it is relevant (weight 1 for
    now: :func:`with_propensity` sets it once the positions are known)."""
    by_term: dict[str, dict[int, int]] = {}
    for row in rows:
        by_term.setdefault(row.term, {})[row.topic_id] = 1
    return [Judged(id=f"search_log:{i}", text=term, topics=topics, source="search_log",
                   clicked=tuple(sorted(topics)))
            for i, (term, topics) in enumerate(by_term.items(), start=1)]


def ips_weight(rank: int | None) -> float:
    """Inverse propensity of a click at ``rank`` (1-based; None = not shown), clipped."""
    r = UNSEEN_RANK if rank is None else min(max(rank, 1), IPS_CLIP)
    return float(r**IPS_ETA)


def with_propensity(
    queries: Sequence[Judged], old_rank: Callable[[Judged, int], int | None]
) -> list[Judged]:
    """Search-log queries weighted by the mean inverse propensity of their clicks."""
    out = []
    for q in queries:
        if q.source == "search_log" and q.clicked:
            weights = [ips_weight(old_rank(q, topic)) for topic in q.clicked]
            q = replace(q, weight=sum(weights) / len(weights))
        out.append(q)
    return out


def counts(queries: Iterable[Judged]) -> dict[str, int]:
    """Judged queries per source (every source named, 0 when it gave none)."""
    out: dict[str, int] = dict.fromkeys(SOURCES, 0)
    for q in queries:
        out[q.source] += 1
    return out
