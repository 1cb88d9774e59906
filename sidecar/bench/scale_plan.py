"""The plan of a forum resampled from a real dump, at any size (numpy only, no I/O).

Each new topic copies a source topic's question (its first public post) and title, and gets as
many posts as a source topic drawn at random has, the replies drawn with replacement from its
own source topic's replies: the text statistics of the dump, in topics that never existed.
A share of the topics is private the ways a real forum's are: private messages, topics in a
read-restricted category or in a subcategory of one (restricted by inheritance), unlisted and
deleted topics; and a few replies of public topics are deleted, hidden, whispers or small
actions. The plan says which post is public, independently of the sidecar's SQL filter, so a
benchmark can check that no stage ever returns one that is not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# Topic kinds. PUBLIC is the only public one.
PUBLIC, PM, STAFF, GROUP, UNLISTED, DELETED_TOPIC = range(6)
# How the private topics split between the private kinds (PM .. DELETED_TOPIC).
PRIVATE_KINDS = (PM, STAFF, GROUP, UNLISTED, DELETED_TOPIC)
PRIVATE_KIND_P = (0.45, 0.20, 0.25, 0.05, 0.05)
# Post flags of replies in public topics. OK is the only public one.
OK, DELETED, HIDDEN, WHISPER, USER_DELETED, SMALL_ACTION = range(6)
FLAGS = (DELETED, HIDDEN, WHISPER, USER_DELETED, SMALL_ACTION)
FLAG_P = (0.4, 0.2, 0.2, 0.1, 0.1)
REPLY_FLAG_RATE = 0.02  # of the replies of public topics, when the private share allows it

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Source:
    """The dump's public posts that have a vector, in (topic, post number) order."""

    post_ids: IntArray
    topic_ids: IntArray

    def topics(self) -> tuple[IntArray, IntArray, IntArray]:
        """(source topic ids, index of each one's first post, posts per topic)."""
        ids, first, counts = np.unique(self.topic_ids, return_index=True, return_counts=True)
        return ids.astype(np.int64), first.astype(np.int64), counts.astype(np.int64)


@dataclass(frozen=True)
class ForumPlan:
    """Topics and posts of a generated forum. Topic ids and post ids count from 1."""

    topic_src: IntArray  # source topic id of each topic
    topic_kind: IntArray
    topic_posts: IntArray  # posts per topic
    post_topic: IntArray  # topic id of each post
    post_number: IntArray
    post_src: IntArray  # index into Source.post_ids of the post whose text (and vector) it reuses
    post_flag: IntArray

    @property
    def n_posts(self) -> int:
        """Posts in the forum."""
        return len(self.post_topic)

    @property
    def public(self) -> npt.NDArray[np.bool_]:
        """Per post (row = post id - 1): public by the plan's own reckoning."""
        return (self.topic_kind[self.post_topic - 1] == PUBLIC) & (self.post_flag == OK)

    @property
    def private_share(self) -> float:
        """The share of posts that are not public."""
        return 1.0 - float(self.public.mean()) if self.n_posts else 0.0


def plan_forum(source: Source, n_posts: int, private_share: float, seed: int = 0) -> ForumPlan:
    """A forum of exactly ``n_posts`` posts of which about ``private_share`` are not public."""
    if not 0.0 <= private_share < 1.0:
        raise ValueError("the private share must be in [0, 1)")
    if n_posts < 1 or len(source.post_ids) == 0:
        raise ValueError("a forum needs posts, and a source with public posts")
    rng = np.random.default_rng(seed)
    src_topics, first, counts = source.topics()
    replies = counts - 1
    n_src = len(src_topics)
    # Enough topics for n_posts, then cut: the last topic keeps only the posts still needed.
    n_topics = int(n_posts / counts.mean() * 1.3) + 10
    src = rng.integers(0, n_src, n_topics)
    length = counts[rng.integers(0, n_src, n_topics)]
    length = np.where(replies[src] == 0, 1, length)  # nothing to draw replies from
    while length.sum() < n_posts:  # a dump of mostly one-post topics (a mail archive's)
        more_src = rng.integers(0, n_src, n_topics)
        more = np.where(replies[more_src] == 0, 1, counts[rng.integers(0, n_src, n_topics)])
        src, length = np.concatenate((src, more_src)), np.concatenate((length, more))
    ends = np.cumsum(length)
    n_topics = int(np.searchsorted(ends, n_posts)) + 1
    src, length = src[:n_topics], length[:n_topics].copy()
    length[-1] -= int(ends[n_topics - 1]) - n_posts
    starts = np.concatenate(([0], np.cumsum(length)[:-1]))
    post_topic = np.repeat(np.arange(n_topics, dtype=np.int64), length)
    post_number = np.arange(n_posts, dtype=np.int64) - np.repeat(starts, length) + 1
    post_src_topic = src[post_topic]
    reply_pick = (rng.random(n_posts) * np.maximum(replies[post_src_topic], 1)).astype(np.int64)
    post_src = np.where(post_number == 1, first[post_src_topic],
                        first[post_src_topic] + 1 + reply_pick)
    # Private topics and flagged replies, so that the whole comes to the share asked.
    reply_share = 1.0 - n_topics / n_posts
    rate = REPLY_FLAG_RATE if private_share >= 5 * REPLY_FLAG_RATE else 0.0
    topic_share = max(0.0, (private_share - reply_share * rate) / (1.0 - reply_share * rate))
    # Topics in random order are made private until their posts reach the share.
    order = rng.permutation(n_topics)
    reached = np.cumsum(length[order]) <= topic_share * n_posts
    private = np.zeros(n_topics, dtype=bool)
    private[order[reached]] = True
    kind = np.where(private, rng.choice(PRIVATE_KINDS, n_topics, p=PRIVATE_KIND_P), PUBLIC)
    flagged = (post_number > 1) & (kind[post_topic] == PUBLIC) & (rng.random(n_posts) < rate)
    flag = np.where(flagged, rng.choice(FLAGS, n_posts, p=FLAG_P), OK)
    return ForumPlan(topic_src=src_topics[src], topic_kind=kind.astype(np.int64),
                     topic_posts=length.astype(np.int64), post_topic=post_topic + 1,
                     post_number=post_number, post_src=post_src.astype(np.int64),
                     post_flag=flag.astype(np.int64))
