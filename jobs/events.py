"""Incremental updates: what a forum event does to the vectors, now and through the queue.

Privacy is handled inside the request: a deleted or hidden post, and any post in scope that is
no longer public (moved into a private message or a read-restricted category, unlisted...), loses
its vectors before the 202 is sent. Re-embedding, which needs the model, is queued; the digest
decides whether a post's text really changed. A post edited, deleted or hidden also queues the
replies whose enriched (strategy 2) text quotes it. Every event is also written to the keyword
change log, which each node's keyword index applies (sidecar/keyword/).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from psycopg import sql

from jobs import queues
from jobs.context import JobContext
from jobs.env import Env
from sidecar.core.strategy import STRATEGY_VERSIONS
from sidecar.db.embeddings import (
    RegisteredModel,
    context_dependents,
    delete_embeddings,
    delete_not_public,
)
from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE, category_subtree
from sidecar.keyword.changes import log_event

log = logging.getLogger(__name__)

EventName = Literal["post_created", "post_edited", "post_deleted", "post_recovered",
                    "post_hidden", "topic_changed", "category_changed"]
EMBED_POSTS = frozenset({"post_created", "post_edited", "post_recovered"})
REMOVE_POSTS = frozenset({"post_deleted", "post_hidden"})
SCOPES = {"topic_changed": "topic", "category_changed": "category"}


@dataclass
class EventOutcome:
    """What an event did at once (vectors removed) and what it queued."""

    event: str
    ids: list[int]
    removed: int = 0
    queued_posts: int = 0
    job_ids: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The 202 body."""
        return {"event": self.event, "ids": len(self.ids), "vectors_removed": self.removed,
                "queued_posts": self.queued_posts, "job_ids": self.job_ids}


def public_post_ids(conn: DictConn, post_ids: Sequence[int], min_chars: int = 1) -> list[int]:
    """The public posts among ``post_ids`` (at least ``min_chars`` long), in id order."""
    rows = conn.execute(
        sql.SQL("SELECT p.id FROM posts p {joins} WHERE p.id = ANY(%s) AND {public}"
                " AND length(p.raw) >= %s ORDER BY p.id").format(
            joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE)),
        (list(post_ids), min_chars),
    ).fetchall()
    return [int(r["id"]) for r in rows]


def public_posts_in_scope(conn: DictConn, *, topic_ids: Sequence[int] = (),
                          category_ids: Sequence[int] = (), min_chars: int = 1) -> list[int]:
    """Public posts of these topics, or of the topics of these categories and their
    subcategories at any depth."""
    rows = conn.execute(
        sql.SQL(
            """
            SELECT p.id FROM posts p {joins}
            WHERE {public} AND length(p.raw) >= %(min_chars)s
              AND (t.id = ANY(%(topics)s::int[]) OR c.id IN {subtree})
            ORDER BY t.bumped_at DESC, t.id DESC, p.post_number
            """
        ).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE),
                 subtree=sql.SQL(category_subtree("SELECT unnest(%(cats)s::int[])"))),
        {"topics": list(topic_ids), "cats": list(category_ids), "min_chars": min_chars},
    ).fetchall()
    return [int(r["id"]) for r in rows]


def index_targets(ctx: JobContext) -> list[tuple[RegisteredModel, int]]:
    """(model, strategy) pairs kept fresh: the serving pair, and every pair that has vectors."""
    res = ctx.resources
    targets = [(res.model, res.settings.strategy)]
    with res.db.connection() as conn:
        rows = conn.execute(
            """
            SELECT m.id, s.strategy FROM sidecar_embedding_models m
            CROSS JOIN unnest(%s::int[]) AS s(strategy)
            WHERE EXISTS (SELECT 1 FROM ai_posts_embeddings e
                          WHERE e.model_id = m.id AND e.strategy_id = s.strategy)
            ORDER BY m.id, s.strategy
            """,
            (sorted(STRATEGY_VERSIONS),),
        ).fetchall()
    for row in rows:
        if (row["id"], row["strategy"]) != (res.model.id, res.settings.strategy):
            targets.append((ctx.model(row["id"]), row["strategy"]))
    return targets


def apply_event(res: Env, event: str, ids: Sequence[int]) -> EventOutcome:
    """Remove what must go now, queue what must be re-embedded, log it for the keyword index."""
    ids = sorted(set(ids))
    if event not in EMBED_POSTS | REMOVE_POSTS | SCOPES.keys():
        raise ValueError(f"unknown event {event!r}")
    outcome = EventOutcome(event, ids)
    settings = res.settings
    with res.db.connection() as conn:
        # Every node's keyword index applies it within SIDECAR_KEYWORD_SYNC_S (a post that left
        # the public is never returned meanwhile: the leg filters at query time).
        log_event(conn, event, ids)
    if event in REMOVE_POSTS or event in EMBED_POSTS:
        with res.db.connection() as conn:
            if event in REMOVE_POSTS:
                # The forum says so: no second opinion, the vectors go (a post wrongly removed
                # comes back as "missing" in the next backfill; a leak would not come back).
                outcome.removed = delete_embeddings(conn, ids)
                embed: set[int] = set()
            else:
                outcome.removed = delete_not_public(conn, post_ids=ids)
                embed = set(ids)
            # Replies whose enriched text quotes these posts (as parent or opening post) change
            # with them; a removed post itself is never re-embedded.
            dependents = set(context_dependents(conn, ids))
            embed |= dependents if embed else dependents - set(ids)
            public = public_post_ids(conn, sorted(embed), settings.min_post_chars)
        from jobs.tasks import embed_posts

        size = settings.backfill_batch_size
        for start in range(0, len(public), size):
            chunk = public[start:start + size]
            job = queues.enqueue(res.redis, settings, queues.INDEX, embed_posts, chunk,
                                 description=f"{event}: embed {len(chunk)} posts")
            outcome.job_ids.append(job.id)
        outcome.queued_posts = len(public)
        return outcome
    if event in SCOPES:
        kind = SCOPES[event]
        scope = {"topic": "topic_ids", "category": "category_ids"}[kind]
        with res.db.connection() as conn:
            outcome.removed = delete_not_public(conn, **{scope: ids})
        from jobs.tasks import reindex_scope

        job = queues.enqueue(res.redis, settings, queues.INDEX, reindex_scope, kind, ids,
                             description=f"{event}: re-check the posts of {len(ids)} {kind}s")
        outcome.job_ids.append(job.id)
        return outcome
    raise ValueError(f"unknown event {event!r}")
