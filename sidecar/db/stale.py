"""Which posts need (re-)embedding: the backfill's and the index events' candidates.

A public post is a candidate for (model, strategy) when it has no vector, a vector of an older
model or strategy version, or was touched since its last check; the vectors themselves are
:mod:`sidecar.db.embeddings`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from psycopg import sql

from sidecar.db.embeddings import RegisteredModel
from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE, category_subtree


class Phase(StrEnum):
    """Why a post is a backfill candidate (a batch's stored ``phase``), in the order worked."""

    MISSING = "missing"  # no vector for (model, strategy)
    OUTDATED = "outdated"  # a vector of an older model or strategy version
    DRIFT = "drift"  # touched since its last check


PHASES: tuple[Phase, ...] = tuple(Phase)


@dataclass(frozen=True, slots=True)
class Scope:
    """Some posts, every post of some topics, every post of some categories at any depth."""

    post_ids: Sequence[int] = ()
    topic_ids: Sequence[int] = ()
    category_ids: Sequence[int] = ()

    def params(self) -> dict[str, list[int]]:
        """The query parameters of ``_IN_SCOPE``."""
        return {"scope_posts": list(self.post_ids), "scope_topics": list(self.topic_ids),
                "scope_cats": list(self.category_ids)}


# A posts row ``p`` lies in the scope of ``Scope.params`` (ids first, so the primary key and the
# topic index find the few posts of an event instead of a scan of the forum).
_IN_SCOPE = sql.SQL(
    " AND p.id IN (SELECT unnest(%(scope_posts)s::bigint[])"
    " UNION SELECT id FROM posts WHERE topic_id = ANY(%(scope_topics)s::int[])"
    " UNION SELECT sp.id FROM posts sp JOIN topics st ON st.id = sp.topic_id"
    " WHERE st.category_id IN " + category_subtree("SELECT unnest(%(scope_cats)s::int[])") + ")")


@dataclass(frozen=True, slots=True)
class Candidate:
    """A public post that may need (re-)embedding, with why and its stored digest."""

    post_id: int
    phase: Phase
    digest: str | None


def stale_candidates(
    conn: DictConn,
    model: RegisteredModel,
    strategy_id: int,
    strategy_version: int,
    *,
    limit: int | None = None,
    min_chars: int = 1,
    phases: Sequence[str] = PHASES,
    scope: Scope | None = None,
) -> list[Candidate]:
    """Public posts that may need (re-)embedding, phase by phase, newest topics first.

    Phases (see ``PHASES``): no vector for (model, strategy); a vector of an older model or
    strategy version; a post, topic or category (and, for the enriched strategy, the opening post
    or the post replied to) touched after the post was last compared with its stored digest in
    ``sidecar_embedding_checks``. Drift candidates may well be unchanged: the digest decides, and
    a post found unchanged is marked checked so it is not selected again. Within a phase, topics
    come by ``bumped_at`` descending (discourse-ai #452: what members read now comes first) and
    posts in topic order. ``scope`` narrows the look to some posts, topics or categories (their
    subcategories included): what a webhook event names.
    """
    unknown = set(phases) - set(PHASES)
    if unknown:
        raise ValueError(f"unknown phases {sorted(unknown)}")
    # The enriched strategy embeds excerpts of the opening post and of the post replied to: an
    # edit of either changes this post's text, and so does its deletion or hiding, which
    # Discourse records in deleted_at / hidden_at without bumping updated_at.
    context_joins = sql.SQL("")
    context_times = sql.SQL("")
    if strategy_id == 2:
        context_joins = sql.SQL(
            """
            LEFT JOIN posts op ON op.topic_id = p.topic_id AND op.post_number = 1
                 AND p.post_number > 1
            LEFT JOIN posts par ON par.topic_id = p.topic_id
                 AND par.post_number = p.reply_to_post_number
            """
        )
        context_times = sql.SQL(", op.updated_at, op.deleted_at, op.hidden_at,"
                                " par.updated_at, par.deleted_at, par.hidden_at")
    rows = conn.execute(
        sql.SQL(
            """
            SELECT post_id, phase, digest FROM (
                SELECT p.id AS post_id, e.digest, t.bumped_at, t.id AS topic_id, p.post_number,
                       CASE WHEN e.post_id IS NULL THEN 1
                            WHEN e.model_version < %(mv)s OR e.strategy_version < %(sv)s THEN 2
                            WHEN greatest(p.updated_at, t.updated_at, c.updated_at {times})
                                 > coalesce(k.checked_at, e.updated_at) THEN 3
                       END AS phase
                FROM posts p {joins}
                LEFT JOIN ai_posts_embeddings e
                       ON e.post_id = p.id AND e.model_id = %(mid)s AND e.strategy_id = %(sid)s
                LEFT JOIN sidecar_embedding_checks k
                       ON k.post_id = p.id AND k.model_id = %(mid)s AND k.strategy_id = %(sid)s
                {context}
                WHERE {public} AND length(p.raw) >= %(min_chars)s {scoped}
            ) c
            WHERE phase = ANY(%(phases)s)
            ORDER BY phase, bumped_at DESC, topic_id DESC, post_number
            LIMIT %(limit)s
            """
        ).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE),
                 context=context_joins, times=context_times,
                 scoped=sql.SQL("") if scope is None else _IN_SCOPE),
        {"mid": model.id, "sid": strategy_id, "mv": model.version, "sv": strategy_version,
         "min_chars": min_chars, "limit": limit,
         "phases": [PHASES.index(p) + 1 for p in phases],
         **(scope or Scope()).params()},
    ).fetchall()
    return [Candidate(int(r["post_id"]), PHASES[r["phase"] - 1], r["digest"]) for r in rows]


def context_dependents(conn: DictConn, post_ids: Sequence[int], strategy_id: int = 2
                       ) -> list[int]:
    """Posts whose stored ``strategy_id`` vector embeds an excerpt of one of ``post_ids``.

    Under the enriched strategy a reply's text holds excerpts of the post it replies to and of
    its topic's opening post; when one of those is edited, deleted or hidden, the reply's text
    changes too. Only posts with a vector of that strategy (by a sidecar model) are returned.
    """
    if not post_ids:
        return []
    rows = conn.execute(
        """
        SELECT DISTINCT r.id FROM posts x
        JOIN posts r ON r.topic_id = x.topic_id AND r.id <> x.id
             AND (r.reply_to_post_number = x.post_number
                  OR (x.post_number = 1 AND r.post_number > 1))
        WHERE x.id = ANY(%(ids)s)
          AND EXISTS (SELECT 1 FROM ai_posts_embeddings e
                      WHERE e.post_id = r.id AND e.strategy_id = %(sid)s
                        AND e.model_id IN (SELECT id FROM sidecar_embedding_models))
        ORDER BY r.id
        """,
        {"ids": list(post_ids), "sid": strategy_id},
    ).fetchall()
    return [int(r["id"]) for r in rows]


def mark_checked(
    conn: DictConn,
    model: RegisteredModel,
    strategy_id: int,
    post_ids: Sequence[int],
    read_at: datetime | None = None,
) -> None:
    """Record that these posts' text, as read at ``read_at`` (UTC; default now), was compared
    with their stored digest.

    ``read_at`` should be when the text was read, not when this is written: an edit landing in
    between must stay newer than the check, or the drift phase would never see it.
    """
    if not post_ids:
        return
    conn.execute(
        """
        INSERT INTO sidecar_embedding_checks (model_id, strategy_id, post_id, checked_at)
        SELECT %s, %s, unnest(%s::bigint[]), coalesce(%s::timestamp, now() AT TIME ZONE 'utc')
        ON CONFLICT (model_id, strategy_id, post_id) DO UPDATE SET checked_at = EXCLUDED.checked_at
        """,
        (model.id, strategy_id, list(post_ids), read_at),
    )
