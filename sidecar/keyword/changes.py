"""What tells every node's keyword index that posts changed: the shared change log.

Three writers append to it: index events (the forum said so), imports (the sidecar wrote the
forum), and the catch-up (the forum's own ``updated_at`` moved with no event: a forum without
the plugin or webhooks). Each node applies it on its own (:class:`~sidecar.keyword.KeywordIndex`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from sidecar.db import Database
from sidecar.db import keyword_sql as ksql
from sidecar.db.pool import DictConn

log = logging.getLogger(__name__)

# An event's scope: the posts it names, or every post of the topics / categories it names.
SCOPE_EVENTS = {"topic_changed": "topic_ids", "category_changed": "category_ids"}


def log_event(conn: DictConn, event: str, ids: Sequence[int]) -> int:
    """Log the posts an index event concerns (for a scope event: all its posts, public or not).

    Run it last in a short transaction: the log's append lock is held until the commit.
    """
    scope = SCOPE_EVENTS.get(event)
    if scope is None:
        return ksql.log_posts(conn, ids)
    return ksql.log_scope(conn, **{scope: ids})


def catch_up(db: Database, *, keep_days: int) -> dict[str, Any]:
    """Log what changed without an event since the last catch-up; prune the old log.

    Scans the posts table (Discourse has no index on ``updated_at``): it runs with the backfill
    and the nightly unit, never per request.
    """
    with db.connection() as conn:
        logged = ksql.catch_up(conn)
    with db.connection() as conn:
        pruned = ksql.prune(conn, timedelta(days=keep_days))
        last = ksql.last_change(conn)
    if logged or pruned:
        log.info("keyword change log: %d posts changed without an event, %d old rows pruned",
                 logged, pruned)
    return {"logged": logged, "pruned": pruned, "last_change": last}


def ask_every_node_to_rebuild(db: Database) -> int:
    """Log a rebuild request: every node builds a new index on its next sync."""
    with db.connection() as conn:
        ksql.log_rebuild(conn)
        return ksql.last_change(conn)
