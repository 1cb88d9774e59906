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
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sidecar.config.settings import Settings
from sidecar.core.answer_messages import abstain_text
from sidecar.core.answer_prompt import is_refusal, strip_thinking
from sidecar.core.forum_links import ForumSite
from sidecar.core.sanitize import (
    MAX_TEXT_CHARS,
    EvidenceRef,
    LinkedPost,
    SanitizeResult,
    sanitize_answer,
)
from sidecar.core.sanitize_messages import Locale, pick_locale
from sidecar.db import Database
from sidecar.db.answers import AnswerRow, insert_answer, mark_gap
from sidecar.db.forum_read import public_posts
from sidecar.db.pool import DictConn
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


@dataclass(frozen=True)
class CheckedEvidence:
    """A retrieval's evidence as it is now: which of its posts are still public, their links."""

    refs: list[EvidenceRef]
    public: frozenset[int]
    site: ForumSite
    locale: Locale

    def sanitize(self, text: str, *, footer: bool = True) -> SanitizeResult:
        """``text`` with checked citations and links (and the Sources footer)."""
        return sanitize_answer(text, self.refs, self.public, self.site, self.locale,
                               footer=footer)


@dataclass(frozen=True)
class Finished:
    """An LLM reply made fit to show: the sanitized answer, or the abstain text when the LLM
    used the refusal clause (``no_answer``: none of its words are kept)."""

    outcome: Literal["answered", "no_answer"]
    result: SanitizeResult


class SanitizeService:
    """Sanitizes LLM answers against retrievals: ``/v1/sanitize``, and ``/v1/answer``'s replies
    (one :meth:`finish` for both, so the same reply gives the same text on either path)."""

    def __init__(self, db: Database, settings: Settings,
                 gap_embedder: Callable[[str], Sequence[float]] | None = None,
                 gap_model: str | None = None) -> None:
        """``gap_embedder``/``gap_model``: the query embedder that keeps an unanswered
        question's vector for the content-gap view (None: not kept)."""
        self.db = db
        self.settings = settings
        self.gap_embedder = gap_embedder
        self.gap_model = gap_model
        try:
            self.site = ForumSite.parse(settings.forum_url)
        except ValueError as exc:
            raise ConfigurationError(f"SIDECAR_FORUM_URL: {exc}") from exc

    def check(self, conn: DictConn, evidence: Sequence[Any], locale: str | None
              ) -> CheckedEvidence:
        """Re-check now, through the public filter, which evidence posts are public."""
        items = [i for i in evidence if isinstance(i, dict)]
        records = public_posts(conn, _post_ids(items))
        current = {
            pid: LinkedPost(
                post_id=pid, topic_id=r.topic_id, post_number=r.post_number, title=r.title,
                url=f"{self.site.base}/t/{r.slug}/{r.topic_id}/{r.post_number}",
                topic_url=self.site.topic_url(r.slug, r.topic_id),
            )
            for pid, r in records.items()
        }
        return CheckedEvidence(evidence_refs(items, current), frozenset(current), self.site,
                               pick_locale(locale, self.settings.forum_locale))

    def finish(self, checked: CheckedEvidence, reply: str) -> Finished:
        """The member's text for an LLM ``reply``: the abstain text if it refused, else the
        reply sanitized (a reasoning model's ``<think>`` dropped first)."""
        if is_refusal(reply):
            text = abstain_text(checked.locale, self.settings.forum_url)
            return Finished("no_answer", SanitizeResult(text=text, citations=[], removed=[]))
        return Finished("answered", checked.sanitize(strip_thinking(reply)))

    def sanitize(self, retrieval_id: str, text: str) -> Finished:
        """Rewrite ``text``'s citations against retrieval ``retrieval_id`` and strip its links;
        the ask is logged (source ``sanitize``).

        Raises NotFound for an unknown (or malformed) retrieval id and PayloadTooLarge for a
        text over ``MAX_TEXT_CHARS``.
        """
        if len(text) > MAX_TEXT_CHARS:
            raise PayloadTooLarge(
                f"text is {len(text)} characters long; the limit is {MAX_TEXT_CHARS}")
        started = time.perf_counter()
        with self.db.connection() as conn:
            row = get_retrieval(conn, retrieval_id)
            if row is None:
                raise NotFound(f"no retrieval {retrieval_id!r}: pass the retrieval_id that "
                               "POST /v1/retrieve returned")
            evidence = row.evidence or []
            if not isinstance(evidence, list):
                log.error("retrieval %s has malformed evidence", retrieval_id)
                evidence = []
            finished = self.finish(self.check(conn, evidence, row.locale), text)
            self.log(conn, row.id, row.query, finished, started)
        return finished

    def log(self, conn: DictConn, retrieval_id: uuid.UUID, query: str, finished: Finished,
            started: float) -> None:
        """Store a checked reply in the ask log; an unanswered one keeps its query's vector."""
        insert_answer(conn, AnswerRow(
            id=uuid.uuid4(), retrieval_id=retrieval_id, source="sanitize",
            outcome=finished.outcome, answer=finished.result.text,
            cited_post_ids=[c.post_id for c in finished.result.citations],
            removed=removed_counts(finished.result),
            total_ms=round((time.perf_counter() - started) * 1000, 3)))
        if finished.outcome == "no_answer" and self.gap_embedder and self.gap_model and query:
            mark_gap(conn, retrieval_id, self.gap_embedder(query), self.gap_model)


def removed_counts(result: SanitizeResult) -> dict[str, int]:
    """What the sanitizer removed, counted by kind (citations, links, html)."""
    counts = {"citations": 0, "links": 0, "html": 0}
    for removal in result.removed:
        counts[{"citation": "citations", "link": "links"}.get(removal.kind, "html")] += 1
    return counts
