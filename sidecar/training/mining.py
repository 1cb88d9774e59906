"""Which (question, post) pairs a forum's threads teach, and with which label (pure, no I/O).

Each public topic is a question its members asked, with the replies it got:

* **questions**: the opening post's words (a long ask) and its first sentences (a short ask).
  Never the title: the post is read with its title (:func:`rerank_passage`), and a question that
  repeated it would teach the model to spot a copied title instead of an answer. Judgements the
  forum holds join them (``judged``): search terms whose results enough distinct members opened
  (Discourse's search log), and a moderator's label naming the topic that should have answered
  a member's question, each asked of the topic it names. A label's question comes from an
  assistant conversation, which may be a private message: its topic is held out, so the label
  measures the model and never trains it.
* **positives**: the accepted answers (Discourse Solved); otherwise the first replies by someone
  other than the asker that say more than "thanks!". (Only the longest replies, of 12 words or
  more, was tried: the model then learned "long" and did worse held out.)
* **negatives**: posts of other topics that the legs rank high for the question (hard: their
  opening posts too, since a neighbour's question is what an unanswered ask finds first), and
  replies of random other topics (easy). Never a post of the same topic. A hard negative whose
  cosine to the question is above its positives' best is dropped: on a forum the same question
  is asked again, and the reply to the repeat *is* an answer (positive-aware mining).

Topics are split into training and held-out ones by a hash of their id, so that the guard
(:mod:`sidecar.training.guard`) measures on threads the model never read.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sidecar.core.rerank_score import rerank_passage
from sidecar.db.training_read import Thread, ThreadPost

QuestionKind = Literal["long", "short", "judged"]
PairKind = Literal["positive", "hard", "random"]

MAX_QUESTION_CHARS = 600


@dataclass(frozen=True, slots=True)
class MiningRules:
    """How many of each, and what is long enough to count."""

    positives: int = 4  # per question
    hard: int = 4  # per question
    random: int = 2  # per question
    min_words: int = 8  # of an opening post to ask
    answer_words: int = 4  # of a reply to count as an answer (or as a random negative)
    short_questions: bool = True
    margin: float = 1.0  # a hard negative above margin x the best positive's cosine is dropped


@dataclass(frozen=True, slots=True)
class Question:
    """One question a topic asks."""

    topic_id: int
    text: str
    kind: QuestionKind


@dataclass(frozen=True, slots=True)
class Candidate:
    """A post the legs found for a question, with its topic's title and its cosine."""

    post_id: int
    topic_id: int
    title: str
    text: str
    cosine: float


@dataclass(frozen=True, slots=True)
class Pair:
    """One training example: the question, the post as the model reads it, the label."""

    question: str
    passage: str
    label: float  # 1.0 answers the question, 0.0 does not
    cosine: float  # the bi-encoder's cosine of the question and the post
    topic_id: int  # the question's topic
    kind: PairKind
    judged: bool = False  # the question is one the forum's people judged (not mined)


def words(text: str) -> int:
    """Word count."""
    return len(text.split())


def first_sentences(text: str, min_words: int = 8, max_words: int = 30) -> str:
    """The opening sentences of ``text`` until ``min_words`` words (at most ``max_words``)."""
    taken: list[str] = []
    for sentence in re.split(r"(?<=[.?!])\s+", " ".join(text.split())):
        taken.append(sentence)
        if words(" ".join(taken)) >= min_words:
            break
    return " ".join(" ".join(taken).split()[:max_words])


def questions(thread: Thread, rules: MiningRules) -> list[Question]:
    """The questions a thread asks: its opening post, and its first sentences (when shorter)."""
    body = " ".join(thread.opening.text.split())
    if words(body) < rules.min_words:
        return []
    long = body[:MAX_QUESTION_CHARS]
    out = [Question(thread.topic_id, long, "long")]
    short = first_sentences(body)
    if rules.short_questions and short and short != long and words(short) >= 4:
        out.append(Question(thread.topic_id, short, "short"))
    return out


def answers(thread: Thread, rules: MiningRules) -> list[ThreadPost]:
    """The replies that answer the thread: its accepted answers, else the first replies by
    someone other than the asker (at most ``rules.positives``)."""
    chosen = set(thread.accepted_all) | ({thread.accepted} if thread.accepted else set())
    accepted = [r for r in thread.replies if r.post_id in chosen][:rules.positives]
    if accepted:
        return accepted
    asker = thread.opening.user_id
    others = [r for r in thread.replies
              if (asker is None or r.user_id != asker) and words(r.text) >= rules.answer_words]
    return sorted(others, key=lambda r: r.post_number)[:rules.positives]


def negatives(question: Question, found: Sequence[Candidate], pool: Sequence[Candidate],
              best_positive: float, rules: MiningRules, rng: random.Random) -> list[Pair]:
    """Hard negatives from ``found`` (the legs' candidates, best first) and random ones from
    ``pool``; never the question's own topic, never a post at least as close as its answers."""
    ceiling = rules.margin * best_positive
    hard = [c for c in found if c.topic_id != question.topic_id and c.cosine <= ceiling
            and words(c.text) >= rules.answer_words]
    others = [c for c in pool if c.topic_id != question.topic_id]
    picked: list[tuple[Candidate, PairKind]] = [
        *((c, "hard") for c in rng.sample(hard, min(rules.hard, len(hard)))),
        *((c, "random") for c in rng.sample(others, min(rules.random, len(others))))]
    return [Pair(question.text, rerank_passage(c.title, c.text), 0.0, c.cosine,
                 question.topic_id, kind, question.kind == "judged") for c, kind in picked]


def held_out(topic_id: int, share: float, seed: str) -> bool:
    """Whether a topic is held out (the same answer for the same topic, seed and share)."""
    digest = hashlib.sha256(f"{seed}:{topic_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share
