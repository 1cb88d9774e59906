"""``POST /v1/sanitize``'s adapter: load the retrieval, re-check its posts now, sanitize.

The pure rules are in ``sidecar.core.sanitize``; this module only does the I/O: it reads the
stored retrieval (``sidecar.db.retrievals.get_retrieval``) and asks the forum, through the public
filter (``sidecar.db.forum_read.public_posts``), which of the evidence posts still exist and are
public at this moment, with their current title and slug. A post deleted, hidden, moved to a
private message or into a read-restricted category since the retrieval is not public any more,
and citations to it are dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from sidecar.config.settings import Settings
from sidecar.core.forum_links import ForumSite
from sidecar.core.sanitize import (
    MAX_TEXT_CHARS,
    EvidenceRef,
    LinkedPost,
    SanitizeResult,
    sanitize_answer,
)
from sidecar.core.sanitize_messages import pick_locale
from sidecar.db import Database
from sidecar.db.forum_read import public_posts
from sidecar.db.retrievals import get_retrieval
from sidecar.errors import ConfigurationError, NotFound, PayloadTooLarge

log = logging.getLogger(__name__)


def _post_ids(evidence: list[dict[str, Any]]) -> list[int]:
    ids: list[int] = []
    for item in evidence:
        for post in (item, *(item.get("neighbours") or [])):
            try:
                ids.append(int(post["post_id"]))
            except (KeyError, TypeError, ValueError):
                continue
    return ids


def evidence_refs(items: Iterable[dict[str, Any]], current: dict[int, LinkedPost]
                  ) -> list[EvidenceRef]:
    """Evidence refs from stored evidence items, with the current posts where still public.

    ``current`` maps post ids to their present state (public posts only); a post absent from it
    keeps its stored ids and URL so that a citation to it can be reported as no longer public.
    """
    refs: list[EvidenceRef] = []
    for item in items:
        try:
            n = int(item["n"])
            post = _linked(item, current)
        except (KeyError, TypeError, ValueError):
            continue  # a malformed stored item cannot be cited
        neighbours: list[LinkedPost] = []
        for nb in item.get("neighbours") or []:
            try:
                neighbours.append(_linked({**nb, "topic_id": nb.get("topic_id",
                                                                    item["topic_id"])}, current))
            except (KeyError, TypeError, ValueError):
                continue
        refs.append(EvidenceRef(n, post, tuple(neighbours)))
    return refs


def _linked(item: dict[str, Any], current: dict[int, LinkedPost]) -> LinkedPost:
    post_id = int(item["post_id"])
    if post_id in current:
        return current[post_id]
    return LinkedPost(post_id=post_id, topic_id=int(item["topic_id"]),
                      post_number=int(item["post_number"]), title=str(item.get("title") or ""),
                      url=str(item.get("url") or ""), topic_url="")


class SanitizeService:
    """Sanitizes LLM answers against stored retrievals."""

    def __init__(self, db: Database, settings: Settings) -> None:
        self.db = db
        self.settings = settings
        try:
            self.site = ForumSite.parse(settings.forum_url)
        except ValueError as exc:
            raise ConfigurationError(f"SIDECAR_FORUM_URL: {exc}") from exc

    def sanitize(self, retrieval_id: str, text: str) -> SanitizeResult:
        """Rewrite ``text``'s citations against retrieval ``retrieval_id`` and strip its links.

        Raises NotFound for an unknown (or malformed) retrieval id and PayloadTooLarge for a
        text over ``MAX_TEXT_CHARS``.
        """
        if len(text) > MAX_TEXT_CHARS:
            raise PayloadTooLarge(
                f"text is {len(text)} characters long; the limit is {MAX_TEXT_CHARS}")
        with self.db.connection() as conn:
            row = get_retrieval(conn, retrieval_id)
            if row is None:
                raise NotFound(f"no retrieval {retrieval_id!r}: pass the retrieval_id that "
                               "POST /v1/retrieve returned")
            evidence = row.evidence or []
            if not isinstance(evidence, list):
                log.error("retrieval %s has malformed evidence", retrieval_id)
                evidence = []
            records = public_posts(conn, _post_ids(evidence))
        current = {
            pid: LinkedPost(
                post_id=pid, topic_id=r.topic_id, post_number=r.post_number, title=r.title,
                url=f"{self.site.base}/t/{r.slug}/{r.topic_id}/{r.post_number}",
                topic_url=self.site.topic_url(r.slug, r.topic_id),
            )
            for pid, r in records.items()
        }
        refs = evidence_refs([i for i in evidence if isinstance(i, dict)], current)
        locale = pick_locale(row.locale, self.settings.forum_locale)
        return sanitize_answer(text, refs, frozenset(current), self.site, locale)
