"""The asks of a retrieval as moderators see them: the answer given, re-checked at display.

An ask (``sidecar_answers``) holds the sanitized Markdown the member was shown, with links to
and titles of the posts it cites, and text the LLM wrote from every evidence post it was given.
When one of those posts is no longer public (deleted, hidden, moved to a private category since),
the answer's text is withheld as a whole (``"withheld": true``) and the cited post keeps only its
number: the same rule as the stored evidence (:func:`sidecar.moderation.service.shown_evidence`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sidecar.db.answers import StoredAnswer

# Outcomes whose text comes from the evidence (the LLM's answer, or the posts that may answer);
# the abstain text of ``abstained`` and ``no_answer`` holds no post's words.
_FROM_EVIDENCE = frozenset({"answered", "failed", "cancelled"})


def _post_id(entry: object) -> int | None:
    value = entry.get("post_id") if isinstance(entry, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def cited_post_ids(asks: Iterable[StoredAnswer]) -> set[int]:
    """Every post the asks cite (to check which are public now)."""
    return {int(pid) for ask in asks for pid in ask.cited_post_ids}


def shown_asks(asks: Iterable[StoredAnswer], evidence: Any, public: set[int]
               ) -> list[dict[str, Any]]:
    """The asks (oldest first) as the review shows them, against the posts ``public`` now."""
    entries = [e for e in evidence if isinstance(e, dict)] if isinstance(evidence, list) else []
    by_post = {pid: e for e in entries if (pid := _post_id(e)) is not None}
    evidence_private = any(pid not in public for pid in by_post)
    shown = []
    for ask in asks:
        cited: list[dict[str, Any]] = []
        cites_private = False
        for pid in ask.cited_post_ids:
            entry = by_post.get(int(pid), {})
            if int(pid) in public:
                cited.append({"n": entry.get("n"), "post_id": int(pid),
                              "title": entry.get("title"), "url": entry.get("url"),
                              "withheld": False})
            else:  # its number only, as withheld evidence keeps
                cites_private = True
                cited.append({"n": entry.get("n"), "post_id": None, "title": None, "url": None,
                              "withheld": True})
        withheld = cites_private or (ask.outcome in _FROM_EVIDENCE and evidence_private)
        shown.append({
            "id": str(ask.id), "created_at": ask.created_at.isoformat(), "source": ask.source,
            "outcome": ask.outcome, "failure_stage": ask.failure_stage, "failure": ask.failure,
            "llm": ask.llm, "model": ask.model, "streamed": ask.streamed,
            "markdown": None if withheld else ask.answer, "withheld": withheld,
            "cited": cited, "removed": {str(k): int(v) for k, v in ask.removed.items()
                                        if isinstance(v, int)},
            "first_token_ms": ask.first_token_ms, "total_ms": ask.total_ms,
            "prompt_tokens": ask.prompt_tokens, "reply_tokens": ask.reply_tokens,
        })
    return shown
