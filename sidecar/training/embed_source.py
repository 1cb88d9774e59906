"""Mining the bi-encoder's pairs from the forum's public threads (the adapter around
:mod:`sidecar.training.embed_pairs`).

Threads, their replies and the passages come through the public filter only
(:mod:`sidecar.db.training_read`, :func:`sidecar.db.forum_read.post_sources`): no private
message, restricted category, hidden, deleted or whisper post is ever read. Neither the
assistant's conversations (moderators' labels name their questions, which may come from private
messages) nor the search log enter the weights: the forum's judgements only measure
(:mod:`sidecar.training.embed_guard`).

Topics are split into training and held-out ones by a hash of their id and the run's seed (fresh
per run, recorded), and every topic a judgement names is held out too, so that the guard
measures on threads the model never read.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from tqdm import tqdm

from sidecar.core.forum_links import ForumSite, resolve_forum_target
from sidecar.core.strategy import PostSource, strategy_text
from sidecar.core.types import Mode
from sidecar.db.chain_read import post_vectors
from sidecar.db.forum_read import post_sources
from sidecar.db.training_read import Thread, opening_posts, reply_links, training_threads
from sidecar.search.service import SearchOptions
from sidecar.training.embed_pairs import (
    EmbedPair,
    EmbedRules,
    answer_posts,
    thread_pairs,
    with_negatives,
)
from sidecar.training.mining import held_out
from sidecar.training.source import MiningResources

READ_BATCH = 500  # posts read per query
HARD_TOPICS = 8  # topics asked of the served search per question, for hard negatives
MINE_BATCH = 64  # questions embedded per round


@dataclass
class EmbedMined:
    """The training pairs, the held-out topics, and what was read."""

    train: list[EmbedPair] = field(default_factory=list)
    held_topics: set[int] = field(default_factory=set)
    threads: int = 0
    links: int = 0

    def as_dict(self) -> dict[str, Any]:
        """JSON record (the manifest's ``training.pairs``)."""
        kinds = ("title", "accepted", "reply", "link")
        return {"threads": self.threads, "held_out_topics": len(self.held_topics),
                "train": {k: sum(p.kind == k for p in self.train) for k in kinds},
                "with_hard_negatives": sum(bool(p.negatives) for p in self.train)}


def mine_embed_pairs(res: MiningResources, *, rules: EmbedRules, max_threads: int,
                     held_share: float, seed: str, exclude: Collection[int] = (),
                     held: Collection[int] = (), progress: bool = True) -> EmbedMined:
    """Read up to ``max_threads`` public threads (never those in ``exclude``) and mine the pairs
    of the training ones; topics in ``held`` or whose hash falls in ``held_share`` are held
    out (read for nothing)."""
    strategy = res.settings.strategy
    with res.db.connection() as conn:
        threads = training_threads(conn, limit=max_threads, seed=seed, exclude=exclude)
    out = EmbedMined(threads=len(threads))
    out.held_topics = {t.topic_id for t in threads
                       if t.topic_id in held or held_out(t.topic_id, held_share, seed)}
    training = [t for t in threads if t.topic_id not in out.held_topics]
    never = frozenset(exclude) | out.held_topics  # a link never leads the model to them
    linked = _linked_openings(res, training, never) if rules.links else {}
    out.links = sum(len(v) for v in linked.values())
    wanted = {t.opening.post_id for t in training}
    wanted |= {pid for t in training for pid in answer_posts(t, rules)}
    wanted |= {pid for ids in linked.values() for pid in ids}
    sources = _sources(res, sorted(wanted))
    bar = tqdm(training, desc="mining embedder pairs", unit="topic", disable=not progress)
    for thread in bar:
        out.train += thread_pairs(thread, sources, strategy, rules,
                                  linked.get(thread.topic_id, ()))
    bar.close()
    if rules.hard_negatives:
        out.train = _add_hard_negatives(res, out.train, rules, never, progress)
    return out


def _sources(res: MiningResources, post_ids: Sequence[int]) -> dict[int, PostSource]:
    out: dict[int, PostSource] = {}
    with res.db.connection() as conn:
        for start in range(0, len(post_ids), READ_BATCH):
            chunk = post_ids[start:start + READ_BATCH]
            out.update((s.post_id, s) for s in post_sources(conn, chunk))
    return out


def _linked_openings(res: MiningResources, threads: Sequence[Thread], never: frozenset[int]
                     ) -> dict[int, list[int]]:
    """Per training topic, the opening posts of the public topics its replies link to."""
    site = ForumSite.parse(res.settings.forum_url)
    targets: dict[int, list[int]] = defaultdict(list)
    with res.db.connection() as conn:
        for start in range(0, len(threads), READ_BATCH):
            ids = [t.topic_id for t in threads[start:start + READ_BATCH]]
            for topic_id, href in reply_links(conn, ids):
                target = resolve_forum_target(href, site)
                if target is not None and target.topic_id != topic_id \
                        and target.topic_id not in never:
                    targets[topic_id].append(target.topic_id)
        openings = opening_posts(conn, {t for ts in targets.values() for t in ts})
    return {topic: list(dict.fromkeys(openings[t] for t in ts if t in openings))
            for topic, ts in targets.items()}


def _add_hard_negatives(res: MiningResources, pairs: list[EmbedPair], rules: EmbedRules,
                        never: frozenset[int], progress: bool) -> list[EmbedPair]:
    """Each pair with the passages of other topics the served search ranks high for its
    question, below its positive's cosine (the served model's stored vectors)."""
    model = res.model
    out: list[EmbedPair] = []
    bar = tqdm(total=len(pairs), desc="hard negatives", unit="pair", disable=not progress)
    for start in range(0, len(pairs), MINE_BATCH):
        batch = pairs[start:start + MINE_BATCH]
        vectors = res.embedder.embed([p.query for p in batch], kind="query")
        positives = res.embedder.embed([p.positive for p in batch], kind="passage")
        found = [res.search.find_topics(p.query, HARD_TOPICS,
                                        SearchOptions(mode=Mode.SEMANTIC, exclude_topics=never
                                                      | {p.topic_id, p.target_topic}),
                                        vector=v, link=0).topics
                 for p, v in zip(batch, vectors, strict=True)]
        post_ids = sorted({t.best.post_id for topics in found for t in topics})
        with res.db.connection() as conn:
            stored = post_vectors(conn, model_id=model.id, strategy_id=res.settings.strategy,
                                  dimensions=model.dimensions, post_ids=post_ids)
            texts = {s.post_id: strategy_text(s, res.settings.strategy)
                     for s in post_sources(conn, post_ids)}
        for pair, q, pos, topics in zip(batch, vectors, positives, found, strict=True):
            qv = _unit(np.asarray(q, dtype=np.float32))
            best = float(qv @ _unit(np.asarray(pos, dtype=np.float32)))
            cands = [(t.topic_id, texts[t.best.post_id],
                      float(qv @ _unit(stored[t.best.post_id])))
                     for t in topics if t.best.post_id in texts and t.best.post_id in stored]
            out.append(with_negatives(pair, cands, best, rules))
        bar.update(len(batch))
    bar.close()
    return out


def _unit(v: np.ndarray) -> np.ndarray:
    return v / (np.linalg.norm(v) or 1.0)


def fresh_seed() -> str:
    """A seed for one run's held-out split: drawn, not public (recorded in the manifest)."""
    return f"{random.SystemRandom().getrandbits(64):016x}"
