"""Evidence items: what the assistant may cite, one per topic, numbered from 1.

Pure: the adapters fetch the posts (through the public filter) and hand their plain text here.
The item shape is part of the contract with ``/v1/sanitize`` (see ``sidecar.db.retrievals``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sidecar.core.text import excerpt, html_to_text

# discourse-ai cuts each reranked document to about this many characters; the cross-encoder
# truncates to its token limit anyway, this only bounds the tokenizer's work.
PASSAGE_CHARS = 2000


@dataclass(frozen=True, slots=True)
class PostText:
    """A public post as evidence needs it: ids, title, link and plain text without quotes."""

    post_id: int
    topic_id: int
    post_number: int
    title: str
    url: str
    text: str


def plain_text(cooked: str) -> str:
    """The post's own words: quotes, Markdown and HTML removed.

    A post that is nothing but a quote keeps the quoted text rather than showing nothing.
    """
    return html_to_text(cooked, drop_quotes=True) or html_to_text(cooked)


def passage(text: str, limit: int = PASSAGE_CHARS) -> str:
    """The start of ``text``, at most ``limit`` characters, cut on a word boundary."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text.rfind(" ", 0, limit)
    return text[: cut if cut > limit // 2 else limit]


def evidence_item(
    n: int,
    post: PostText,
    score: float | None,
    query: str,
    chars: int,
    neighbours: Sequence[PostText] = (),
) -> dict[str, Any]:
    """One numbered evidence entry with a targeted excerpt of the best post and its neighbours."""
    return {
        "n": n,
        "topic_id": post.topic_id,
        "title": post.title,
        "post_id": post.post_id,
        "post_number": post.post_number,
        "url": post.url,
        "excerpt": excerpt(post.text, query, chars),
        "score": None if score is None else round(float(score), 6),
        "neighbours": [
            {"post_id": nb.post_id, "post_number": nb.post_number, "url": nb.url,
             "excerpt": excerpt(nb.text, query, chars)}
            for nb in sorted(neighbours, key=lambda p: p.post_number)
        ],
    }
