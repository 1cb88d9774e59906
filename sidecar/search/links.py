"""The post chooser's adapter: reads the ranked topics' posts, then runs the pure chooser.

``SearchService.find_topics`` calls it last, for the topics a caller will show: the link of
``/v1/search``, the evidence of ``/v1/retrieve`` (and so the citations ``/v1/sanitize``
allows) and the evaluation's post metrics all read ``TopicHit.answers``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sidecar.core.postchoice import ANSWER_RULE, Chooser, LinkRule, PostFeatures, choose
from sidecar.core.trace import Trace
from sidecar.core.types import Leg, TopicHit
from sidecar.db import Database
from sidecar.db.chain_read import FeatureReader
from sidecar.db.embeddings import RegisteredModel
from sidecar.db.post_features import PostFeatureReader, PostRow


def _features(row: PostRow, keyword: dict[int, float], fused: dict[int, float]
              ) -> PostFeatures:
    return PostFeatures(post_id=row.post_id, post_number=row.post_number,
                        similarity=row.similarity, keyword=keyword.get(row.post_id, 0.0),
                        fused=fused.get(row.post_id), accepted=row.accepted,
                        by_asker=row.by_asker, likes=row.likes, staff=row.staff,
                        replied=row.replies)


def keyword_share(topics: Sequence[TopicHit]) -> dict[int, float]:
    """Each post's keyword score relative to the best keyword score among ``topics``."""
    scores = {p.post_id: p.leg_scores[Leg.KEYWORD] for t in topics for p in t.posts
              if Leg.KEYWORD in p.leg_scores}
    best = max(scores.values(), default=0.0)
    return {pid: s / best for pid, s in scores.items()} if best > 0 else {}


class PostLinker:
    """Chooses the linked post of each shown topic; shared by a process's searches."""

    def __init__(self, db: Database, model: RegisteredModel, *, per_topic: int,
                 reader: FeatureReader | None = None) -> None:
        self.db = db
        self.model = model
        self.per_topic = per_topic
        self.reader = PostFeatureReader(reader)

    def link(self, topics: Sequence[TopicHit], n: int, *, vector: Any, strategy: int,
             chooser: Chooser, rule: LinkRule = ANSWER_RULE, trace: Trace | None = None,
             start: int = 0) -> list[TopicHit]:
        """``topics`` with those from ``start`` to ``n`` linked (``answers`` set); the rest
        unchanged. Each topic's choice reads that topic's posts and the keyword scores of all
        ``topics``, so linking a list in two parts chooses as linking it at once."""
        trace = trace or Trace()
        head = list(topics[start:n])
        if not head:
            trace.skip("link", "no topic to link")
            return list(topics)
        with trace.step("link") as detail:
            detail.update(chooser=chooser.value, topics=len(head))
            if chooser is Chooser.ANSWER:
                detail.update(rule=rule.source, weights=rule.as_dict())
            with self.db.connection() as conn:
                rows = self.reader.posts(conn, [t.topic_id for t in head],
                                         model_id=self.model.id, strategy_id=strategy,
                                         dimensions=self.model.dimensions, vector=vector,
                                         per_topic=self.per_topic)
            keyword = keyword_share(topics)
            reasons: Counter[str] = Counter()
            linked = []
            for topic in head:
                posts = rows.get(topic.topic_id)
                if not posts:  # no public post left: the caller's public check drops it
                    linked.append(topic)
                    continue
                fused = {p.post_id: p.score for p in topic.posts}
                choice = choose([_features(r, keyword, fused) for r in posts], chooser, rule)
                reasons[choice.reason] += 1
                sims = tuple((r.post_id, r.similarity) for r in posts
                             if r.similarity is not None)
                linked.append(replace(topic, answers=choice.order, link_reason=choice.reason,
                                      similarity=max(s for _, s in sims) if sims else None,
                                      post_similarity=sims))
            detail.update(reasons=dict(reasons),
                          changed=sum(1 for t in linked if t.link_id != t.best.post_id))
        return list(topics[:start]) + linked + list(topics[n:])
