"""The content-gap view: what members ask that the forum does not answer, grouped by subject.

Reads the unanswered questions of a period (their zone abstained or their ask ended
``no_answer``; :func:`sidecar.db.answers.gap_questions`), the most recent
``SIDECAR_GAP_MAX_QUESTIONS`` of them, embedded by the served model only (another model's
vectors are not comparable), and groups them with :func:`sidecar.core.gaps.group_questions` at
``SIDECAR_GAP_SIMILARITY``. What it shows is the standalone question each member asked: no
evidence, no post of the forum.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sidecar.config.settings import Settings
from sidecar.core.gaps import group_questions
from sidecar.db import Database
from sidecar.db.answers import GapQuestion, gap_questions
from sidecar.moderation.models import GapQuery


def content_gaps(db: Database, settings: Settings, model: str, query: GapQuery,
                 now: datetime | None = None) -> dict[str, Any]:
    """The subjects of the period's unanswered questions, by count, with examples."""
    until = now or datetime.now(UTC)
    since = until - timedelta(days=query.days)
    cap = settings.gap_max_questions
    with db.connection() as conn:
        rows = gap_questions(conn, model, since, until, cap + 1)
    capped = len(rows) > cap
    rows = rows[:cap]
    groups = group_questions(rows, [r.vector for r in rows], [r.created_at for r in rows],
                             settings.gap_similarity)
    return {
        "since": since.isoformat(), "until": until.isoformat(), "days": query.days,
        "model": model, "similarity": settings.gap_similarity,
        "questions": len(rows), "capped": capped,
        "groups": [{"count": g.count, "last_asked": g.last_asked.isoformat(),
                    "examples": [_example(q) for q in g.questions[:query.examples]]}
                   for g in groups],
    }


def _example(q: GapQuestion) -> dict[str, Any]:
    # The zone abstained without an ask (/v1/retrieve: the assistant showed the abstain text).
    outcome = q.outcome or "abstained"
    return {"retrieval_id": str(q.retrieval_id), "asked_at": q.created_at.isoformat(),
            "query": q.query, "outcome": outcome}
