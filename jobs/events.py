"""Incremental updates: what a forum event does to the vectors, now and through the queue.

Privacy is handled inside the request: a deleted or hidden post, and any post in scope that is
no longer public (moved into a private message or a read-restricted category, unlisted...), loses
its vectors before the 202 is sent. Re-embedding, which needs the model, is queued; the digest
decides whether a post's text really changed. A post edited, deleted or hidden also queues the
replies whose enriched (strategy 2) text quotes it. Every event is also written to the keyword
change log, which each node's keyword index applies (sidecar/keyword/).

An event may also be a mere hint (a Discourse webhook delivery: its body is signed, its event
name is not): then it only says where to look. The database decides what goes (only what is no
longer public loses its vectors) and what is queued (only public posts whose vectors are missing,
outdated or older than their last change), so a hint that changes nothing queues nothing. Such a
hint may have come before the forum's commit, or been read from a lagging replica: it is looked
at again by the worker later (:func:`schedule_recheck`). Whatever the events do, the backfill's
planning removes the vectors of every post no longer public (:mod:`jobs.planner`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from jobs import context, queues
from jobs.tasks import embed_posts, index_targets, reindex_scope
from sidecar.core.strategy import STRATEGY_VERSIONS
from sidecar.db.embeddings import RegisteredModel, delete_embeddings, delete_not_public
from sidecar.db.pool import DictConn
from sidecar.db.public import public_post_ids
from sidecar.db.stale import Scope, context_dependents, stale_candidates
from sidecar.keyword.changes import log_event
from sidecar.related.cache import drop_for_event
from sidecar.runtime.resources import Resources

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

    @property
    def changed(self) -> bool:
        """Whether it removed or queued anything."""
        return bool(self.removed or self.queued_posts or self.job_ids)


def stale_in_scope(conn: DictConn, targets: Sequence[tuple[RegisteredModel, int]],
                   scope: Scope, min_chars: int, limit: int | None = None) -> list[int]:
    """Public posts of ``scope`` whose vectors of one of the kept (model, strategy) ``targets``
    need work (missing, outdated, or older than the post's last change)."""
    found: set[int] = set()
    for model, strategy in targets:
        found.update(c.post_id for c in stale_candidates(
            conn, model, strategy, STRATEGY_VERSIONS[strategy], limit=limit,
            min_chars=min_chars, scope=scope))
    return sorted(found)


def apply_event(res: Resources, event: str, ids: Sequence[int], *,
                hint: bool = False) -> EventOutcome:
    """Remove what must go now, queue what must be re-embedded, log it for the keyword index,
    and drop the cached related-topic lists it touches (once the vectors that must go are gone).

    ``hint``: the event only says where to look (see the module's docstring).
    """
    outcome = _apply(res, event, ids, hint=hint)
    drop_for_event(res.redis, res.settings, res.db, event, outcome.ids)
    return outcome


def schedule_recheck(res: Resources, event: str, ids: Sequence[int], token: str) -> int | None:
    """Apply a hint that changed nothing again, as a hint, ``SIDECAR_DISCOURSE_RECHECK_S``
    later in the worker; the delay, or None when re-checks are off.

    ``token`` names the delivery: its replays keep one re-check waiting (the job id is theirs),
    so replaying a body cannot fill the queue.
    """
    delay = res.settings.discourse_recheck_s
    if delay <= 0:
        return None
    queues.enqueue(res.redis, res.settings, queues.INDEX, recheck_hint, event, sorted(set(ids)),
                   job_id=f"recheck-{token}", delay_s=delay,
                   description=f"{event}: look again at {len(ids)} ids")
    return delay


def recheck_hint(event: str, ids: list[int]) -> dict[str, Any]:
    """The job of :func:`schedule_recheck`: the hint applied again, the database read now."""
    res = context.installed() or context.start_from_environment()
    outcome = apply_event(res, event, ids, hint=True)
    return {"event": event, "ids": len(ids), "removed": outcome.removed,
            "queued_posts": outcome.queued_posts, "job_ids": outcome.job_ids}


def _apply(res: Resources, event: str, ids: Sequence[int], *, hint: bool) -> EventOutcome:
    ids = sorted(set(ids))
    if event not in EMBED_POSTS | REMOVE_POSTS | SCOPES.keys():
        raise ValueError(f"unknown event {event!r}")
    outcome = EventOutcome(event, ids)
    settings = res.settings
    targets = index_targets(res) if hint else []  # before taking a connection: it takes one
    with res.db.connection() as conn:
        # Every node's keyword index applies it within SIDECAR_KEYWORD_SYNC_S (a post that left
        # the public is never returned meanwhile: the leg filters at query time).
        log_event(conn, event, ids)
    if event in REMOVE_POSTS or event in EMBED_POSTS:
        with res.db.connection() as conn:
            if event in REMOVE_POSTS and not hint:
                # The forum says so: no second opinion, the vectors go (a post wrongly removed
                # comes back as "missing" in the next backfill; a leak would not come back).
                outcome.removed = delete_embeddings(conn, ids)
                embed: set[int] = set()
            else:
                outcome.removed = delete_not_public(conn, post_ids=ids)
                embed = set() if event in REMOVE_POSTS else set(ids)
            # Replies whose enriched text quotes these posts (as parent or opening post) change
            # with them; a removed post itself is never re-embedded.
            dependents = set(context_dependents(conn, ids))
            embed |= dependents if embed else dependents - set(ids)
            if hint:  # only what the database says needs work
                public = stale_in_scope(conn, targets, Scope(post_ids=sorted(embed)),
                                        settings.min_post_chars) if embed else []
            else:
                public = public_post_ids(conn, sorted(embed), settings.min_post_chars)
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
            if hint and not stale_in_scope(conn, targets, Scope(**{scope: ids}),
                                           settings.min_post_chars, limit=1):
                return outcome  # every public post in scope is up to date
        job = queues.enqueue(res.redis, settings, queues.INDEX, reindex_scope, kind, ids,
                             description=f"{event}: re-check the posts of {len(ids)} {kind}s")
        outcome.job_ids.append(job.id)
        return outcome
    raise ValueError(f"unknown event {event!r}")
