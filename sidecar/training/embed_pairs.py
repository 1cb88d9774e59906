"""Which (question, passage) pairs teach the bi-encoder a forum's language (pure, no I/O).

A public thread is a question its members asked and the replies it got. The bi-encoder learns to
put a question near the posts that answer it, in the forum's own words:

* **title → opening post**: the title as a member would type it, the opening post as the
  semantic leg stores it (its strategy text: title, category, tags, then the post).
* **ask → answer**: the title and the first :attr:`EmbedRules.ask_chars` characters of the
  opening post (a question with its details), and the accepted answer first (Discourse Solved),
  else the first replies by someone other than the asker that say enough.
* **link**: a reply that links another public topic ("see /t/…/123") says the two threads answer
  one question: the ask of the one, the opening post of the other.

Passages are the exact texts the indexer embeds (:func:`sidecar.core.strategy.strategy_text`),
so the model learns on what it will be served. Every other pair of a training batch is a
negative (in-batch negatives), and a batch never holds two pairs of one topic: a thread's other
replies are not wrong answers to its question (:func:`batches`). Optionally, posts of other
topics that the served search ranks high become hard negatives, unless they are at least as
close to the question as its answers (on a forum the same question is asked again).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from sidecar.core.strategy import PostSource, strategy_text
from sidecar.db.training_read import Thread

PairKind = Literal["title", "accepted", "reply", "link"]


@dataclass(frozen=True, slots=True)
class EmbedRules:
    """How many pairs of each kind a thread gives, and what is long enough to count."""

    title_pairs: bool = True  # title -> opening post
    replies: int = 2  # ask -> reply pairs per topic (the accepted answer counts as one)
    min_reply_chars: int = 30  # shorter replies ("thanks!") teach nothing
    ask_chars: int = 400  # of the opening post, after the title, in an ask
    links: bool = True  # ask -> linked topic's opening post
    hard_negatives: int = 0  # per ask, from the served search (0: in-batch negatives only)
    margin: float = 1.0  # a hard negative above margin x its answers' cosine is dropped


@dataclass(frozen=True, slots=True)
class EmbedPair:
    """One training example: a question, a passage that answers it, optional hard negatives."""

    query: str
    positive: str
    topic_id: int  # the question's topic
    kind: PairKind
    target_topic: int  # the positive's topic (another one for a link)
    negatives: tuple[str, ...] = ()


def ask_text(thread: Thread, chars: int) -> str:
    """A question with its details: the title, then the start of the opening post."""
    body = " ".join(thread.opening.text.split())
    if len(body) > chars:
        cut = body.rfind(" ", 0, chars)
        body = body[: cut if cut > chars // 2 else chars]
    return f"{thread.title}\n\n{body}" if body else thread.title


def accepted(thread: Thread) -> frozenset[int]:
    """The thread's accepted answers (several since discourse-solved 2026-04)."""
    return frozenset(thread.accepted_all) | ({thread.accepted} if thread.accepted else set())


def answer_posts(thread: Thread, rules: EmbedRules) -> list[int]:
    """Post ids of the replies that answer the thread: its accepted answers first, then the
    first replies by someone other than the asker, ``rules.replies`` in all."""
    asker = thread.opening.user_id
    chosen = accepted(thread)
    out = [r.post_id for r in thread.replies if r.post_id in chosen]
    for reply in sorted(thread.replies, key=lambda r: r.post_number):
        if len(out) >= rules.replies:
            break
        if reply.post_id in out or len(reply.text.strip()) < rules.min_reply_chars:
            continue
        if asker is None or reply.user_id != asker:
            out.append(reply.post_id)
    return out[: rules.replies]


def thread_pairs(thread: Thread, sources: Mapping[int, PostSource], strategy: int,
                 rules: EmbedRules, linked: Sequence[int] = ()) -> list[EmbedPair]:
    """The pairs one thread teaches. ``sources``: the public posts' embedding inputs by post id
    (a post missing there is skipped); ``linked``: the opening post ids of public topics its
    replies link to."""
    out: list[EmbedPair] = []
    opening = sources.get(thread.opening.post_id)
    title = " ".join(thread.title.split())
    if rules.title_pairs and opening is not None and title and opening.text.strip():
        out.append(EmbedPair(title, strategy_text(opening, strategy), thread.topic_id, "title",
                             thread.topic_id))
    ask = ask_text(thread, rules.ask_chars)
    chosen = accepted(thread)
    for post_id in answer_posts(thread, rules):
        source = sources.get(post_id)
        if source is not None:
            kind: PairKind = "accepted" if post_id in chosen else "reply"
            out.append(EmbedPair(ask, strategy_text(source, strategy), thread.topic_id, kind,
                                 thread.topic_id))
    if rules.links:
        for post_id in dict.fromkeys(linked):
            source = sources.get(post_id)
            if source is not None and source.topic_id != thread.topic_id:
                out.append(EmbedPair(ask, strategy_text(source, strategy), thread.topic_id,
                                     "link", source.topic_id))
    return out


def with_negatives(pair: EmbedPair, found: Sequence[tuple[int, str, float]], best: float,
                   rules: EmbedRules) -> EmbedPair:
    """``pair`` with up to ``rules.hard_negatives`` of ``found`` ((topic id, passage, cosine to
    the question), best first): never the question's or the positive's topic, never a passage at
    least ``rules.margin`` x as close as ``best``, the question's answers' best cosine."""
    ceiling = rules.margin * best
    picked = [text for topic, text, cosine in found
              if topic not in (pair.topic_id, pair.target_topic) and cosine < ceiling]
    return EmbedPair(pair.query, pair.positive, pair.topic_id, pair.kind, pair.target_topic,
                     tuple(picked[: rules.hard_negatives]))


def batches(pairs: Sequence[EmbedPair], size: int, epochs: float, rng: random.Random
            ) -> list[list[EmbedPair]]:
    """Shuffled batches for ``epochs`` epochs in which no two pairs share a topic (as question
    or as positive): in-batch negatives must be other threads. A pair that finds no room in the
    current batches waits for the next ones."""
    total = max(1, round(len(pairs) * epochs / size)) if pairs else 0
    out: list[list[EmbedPair]] = []
    while len(out) < total:
        order = list(pairs)
        rng.shuffle(order)
        open_: list[tuple[list[EmbedPair], set[int]]] = []
        for pair in order:
            topics = {pair.topic_id, pair.target_topic}
            for batch, used in open_:
                if len(batch) < size and not topics & used:
                    batch.append(pair)
                    used |= topics
                    break
            else:
                open_.append(([pair], set(topics)))
            # Full batches leave the open list, so the search above stays short.
            full = [b for b, _ in open_ if len(b) >= size]
            out += full
            open_ = [(b, u) for b, u in open_ if len(b) < size]
        out += [b for b, _ in open_ if len(b) >= 2]
    return out[:total]
