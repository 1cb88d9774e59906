"""Mining the forum's pairs: its public threads, asked of its own search (the adapter).

Each question is embedded once and asked of the served search with its own topic left out of
both legs; the replies of the topics the legs rank high are its hard negatives. Cosines come from
the stored vectors (those the semantic leg and the post linker read), so a pair's cosine is the
one the served reranker will correct. Rules: :mod:`sidecar.training.mining`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
from tqdm import tqdm

from models.protocols import Embedder
from sidecar.config.settings import Settings
from sidecar.core.evidence import plain_text
from sidecar.core.rerank_score import rerank_passage
from sidecar.db import Database
from sidecar.db.chain_read import post_vectors
from sidecar.db.embeddings import RegisteredModel
from sidecar.db.forum_read import public_posts
from sidecar.db.judgements_read import MIN_MEMBERS, click_judgements, label_judgements
from sidecar.db.pool import DictConn
from sidecar.db.training_read import Thread, ThreadPost, training_threads
from sidecar.search.service import SearchOptions, SearchService
from sidecar.training.mining import (
    MAX_QUESTION_CHARS,
    Candidate,
    MiningRules,
    Pair,
    Question,
    answers,
    held_out,
    negatives,
    questions,
    words,
)

HARD_TOPICS = 10  # topics asked of the legs per question
POSTS_PER_TOPIC = 3  # of each, in the post chooser's order
BATCH = 64  # questions embedded and read per round
RANDOM_PER_BATCH = 32  # replies the batch's random negatives are drawn from


class MiningResources(Protocol):
    """What mining reads: the database, the served search and its embedder."""

    @property
    def settings(self) -> Settings:
        """The process's settings."""
        ...

    @property
    def db(self) -> Database:
        """The connection pool."""
        ...

    @property
    def model(self) -> RegisteredModel:
        """The serving embedding model."""
        ...

    @property
    def embedder(self) -> Embedder:
        """Its embedder."""
        ...

    @property
    def search(self) -> SearchService:
        """The served search."""
        ...


@dataclass
class Mined:
    """The pairs of the training topics and of the held-out ones, and what was read."""

    train: list[Pair] = field(default_factory=list)
    held: list[Pair] = field(default_factory=list)
    threads: int = 0
    held_topics: int = 0
    questions: int = 0
    judged: int = 0  # of the questions: moderator labels and search-log clicks
    labelled: int = 0  # of the judged: moderators' labels, held out (measured, never trained)
    skipped: int = 0  # questions with no answer long enough, or no negative

    def as_dict(self) -> dict[str, Any]:
        """JSON record (the manifest's ``training.pairs``)."""
        def count(pairs: Sequence[Pair]) -> dict[str, int]:
            return {kind: sum(p.kind == kind for p in pairs)
                    for kind in ("positive", "hard", "random")}
        return {"threads": self.threads, "held_out_topics": self.held_topics,
                "questions": self.questions, "judged_questions": self.judged,
                "labelled_questions_held_out": self.labelled,
                "skipped_questions": self.skipped,
                "train": count(self.train), "held_out": count(self.held)}


def mine(res: MiningResources, *, rules: MiningRules, max_threads: int, held_share: float,
         seed: str, exclude: Collection[int] = (), progress: bool = True) -> Mined:
    """Read up to ``max_threads`` public threads (never the topics in ``exclude``) and mine
    their pairs; topics whose hash falls in ``held_share`` go to the held-out side, and so do
    the topics moderators' labels name (:func:`label_questions`: measured, never trained)."""
    rng = random.Random(seed)
    hidden = frozenset(exclude)  # never read: not even as another question's negative
    with res.db.connection() as conn:
        threads = training_threads(conn, limit=max_threads, seed=seed, exclude=exclude)
        clicked = [(text, topic) for text, topic in forum_judgements(
            conn, min_members=res.settings.click_min_members) if topic not in hidden]
        labelled = [(text, topic) for text, topic in label_questions(conn)
                    if topic not in hidden]
        read = {t.topic_id for t in threads}
        missing = {topic for _, topic in clicked + labelled} - read
        if missing:  # a judged topic is read even beyond the sample
            threads += training_threads(conn, limit=len(missing), seed=seed, exclude=exclude,
                                        only=missing)
    by_id = {t.topic_id: t for t in threads}
    measured = frozenset(topic for _, topic in labelled)

    def held(topic_id: int) -> bool:
        return topic_id in measured or held_out(topic_id, held_share, seed)

    out = Mined(threads=len(threads))
    out.held_topics = sum(held(t.topic_id) for t in threads)
    asks = [(t, q) for t in threads for q in questions(t, rules)]
    asks += [(by_id[topic], Question(topic, text[:MAX_QUESTION_CHARS], "judged"))
             for text, topic in dict.fromkeys(clicked + labelled) if topic in by_id]
    out.questions = len(asks)
    out.judged = sum(q.kind == "judged" for _, q in asks)
    out.labelled = sum(topic in by_id for _, topic in dict.fromkeys(labelled))
    pool = _reply_pool(threads, rules)
    # Held-out pairs keep every hard negative: the guard must not measure the bi-encoder on
    # negatives chosen below its own scores.
    sides = ((out.train, rules, [a for a in asks if not held(a[0].topic_id)]),
             (out.held, replace(rules, margin=math.inf), [a for a in asks if held(a[0].topic_id)]))
    bar = tqdm(total=len(asks), desc="mining pairs", unit="question", disable=not progress)
    for pairs_out, side_rules, side in sides:
        for start in range(0, len(side), BATCH):
            batch = side[start:start + BATCH]
            for pairs in _mine_batch(res, batch, pool, side_rules, rng, hidden):
                if pairs:
                    pairs_out.extend(pairs)
                else:
                    out.skipped += 1
            bar.update(len(batch))
    bar.close()
    return out


def forum_judgements(conn: DictConn, *, min_members: int = MIN_MEMBERS
                     ) -> list[tuple[str, int]]:
    """(question, topic) pairs the forum's members judged that a model may learn from: search
    terms whose result at least ``min_members`` distinct members opened (no staff, no
    crawler). Public topics only (the readers drop the others). Moderators' labels are not
    among them: :func:`label_questions`."""
    out = [(r.term, r.topic_id) for r in click_judgements(conn, min_members=min_members)]
    return list(dict.fromkeys((text, topic) for text, topic in out if text))


def label_questions(conn: DictConn) -> list[tuple[str, int]]:
    """(question, topic) pairs of moderators' labels naming the topic that answers a member's
    question. The question is the assistant conversation's standalone query, and a conversation
    may be a private message: these measure a model (held out) and never enter its weights,
    since the docs promise that no private text is read into a model."""
    out = [(" ".join(r.query.split()), r.topic_id) for r in label_judgements(conn)]
    return list(dict.fromkeys((text, topic) for text, topic in out if text))


def _reply_pool(threads: Sequence[Thread], rules: MiningRules
                ) -> dict[int, tuple[Thread, ThreadPost]]:
    """Replies long enough to be answers, by post id: where random negatives are drawn."""
    return {r.post_id: (t, r) for t in threads for r in t.replies
            if words(r.text) >= rules.answer_words}


def _mine_batch(res: MiningResources, batch: Sequence[tuple[Thread, Question]],
                pool: dict[int, tuple[Thread, ThreadPost]], rules: MiningRules,
                rng: random.Random, hidden: frozenset[int]) -> list[list[Pair]]:
    """The pairs of each question of one batch (empty when it teaches nothing)."""
    vectors = res.embedder.embed([q.text for _, q in batch], kind="query")
    found = [res.search.find_topics(q.text, HARD_TOPICS,
                                    SearchOptions(exclude_topics=hidden | {t.topic_id}),
                                    vector=v).topics
             for (t, q), v in zip(batch, vectors, strict=True)]
    hard_ids = {pid for topics in found for topic in topics
                for pid in topic.link_order()[:POSTS_PER_TOPIC]}
    own = {r.post_id: (t, r) for t, _ in batch for r in answers(t, rules)}
    random_ids = rng.sample(sorted(pool), min(len(pool), RANDOM_PER_BATCH))
    model = res.model
    with res.db.connection() as conn:
        records = public_posts(conn, sorted(hard_ids))
        stored = post_vectors(conn, model_id=model.id, strategy_id=res.settings.strategy,
                              dimensions=model.dimensions,
                              post_ids=sorted({*own, *random_ids}))
    out: list[list[Pair]] = []
    for (thread, question), vector, topics in zip(batch, vectors, found, strict=True):
        q = np.asarray(vector, dtype=np.float32)
        q = q / (np.linalg.norm(q) or 1.0)

        def cosine(post_id: int, q: np.ndarray = q) -> float | None:
            v = stored.get(post_id)
            return None if v is None else float(v @ q / (np.linalg.norm(v) or 1.0))

        positives = [(r, c) for r in answers(thread, rules) if (c := cosine(r.post_id))
                     is not None]
        hard = [Candidate(pid, rec.topic_id, rec.title, plain_text(rec.cooked), sim)
                for topic in topics for pid in topic.link_order()[:POSTS_PER_TOPIC]
                if (rec := records.get(pid)) is not None
                and (sim := topic.similarity_of(pid)) is not None]
        easy = [Candidate(pid, owner.topic_id, owner.title, reply.text, sim)
                for pid in random_ids if (sim := cosine(pid)) is not None
                for owner, reply in [pool[pid]]]
        if not positives:
            out.append([])
            continue
        pairs = [Pair(question.text, rerank_passage(thread.title, r.text), 1.0, c,
                      thread.topic_id, "positive", question.kind == "judged")
                 for r, c in positives]
        pairs += negatives(question, hard, easy, max(c for _, c in positives), rules, rng)
        out.append(pairs if len(pairs) > len(positives) else [])
    return out
