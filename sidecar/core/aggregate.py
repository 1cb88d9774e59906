"""Topic aggregation: one entry per topic, so a megathread cannot take every slot."""

from __future__ import annotations

from collections.abc import Iterable

from sidecar.core.types import FusedPost, TopicHit, TopicScore


def aggregate_topics(
    posts: Iterable[FusedPost], method: TopicScore = TopicScore.BEST
) -> list[TopicHit]:
    """Group fused posts by topic and score each topic from its posts.

    ``BEST`` takes the best post's score; ``MEAN2`` the mean of the best two (of the one post when
    the topic has a single match, so a short topic is not punished for being short). Topics are
    ordered by score, then by their best post's order in the input (stable), then by id.
    """
    groups: dict[int, list[FusedPost]] = {}
    first_seen: dict[int, int] = {}
    for position, post in enumerate(posts):
        groups.setdefault(post.topic_id, []).append(post)
        first_seen.setdefault(post.topic_id, position)
    hits: list[TopicHit] = []
    for topic_id, members in groups.items():
        members.sort(key=lambda p: (-p.score, p.post_id))
        if method is TopicScore.MEAN2:
            top = members[:2]
            score = sum(p.score for p in top) / len(top)
        else:
            score = members[0].score
        hits.append(TopicHit(topic_id=topic_id, score=score, posts=tuple(members)))
    hits.sort(key=lambda h: (-h.score, first_seen[h.topic_id], h.topic_id))
    return hits
