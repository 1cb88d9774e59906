"""What text is embedded for a post, per strategy, and its sha1 digest.

Strategy 1 follows discourse-ai's Truncation strategy: the topic title, the (leaf) category name,
the tags joined by ", ", each followed by a blank line, then the post as plain text; the whole is
truncated to the model's maximum tokens minus the two special tokens. Strategy 2 adds context:
an excerpt of the opening post and of the post replied to, before the post itself.
The digest is the sha1 of the exact text the model sees, so unchanged text is never re-embedded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass

# Bumping a version makes the backfill re-select every row embedded with an older one.
STRATEGY_VERSIONS: dict[int, int] = {1: 1, 2: 1}
STRATEGY_NAMES: dict[int, str] = {1: "truncation", 2: "enriched"}
CONTEXT_EXCERPT_CHARS = 300


@dataclass(frozen=True, slots=True)
class PostSource:
    """Everything a strategy may use to build a post's embedded text (all plain text)."""

    post_id: int
    topic_id: int
    post_number: int
    title: str
    category: str
    tags: tuple[str, ...]
    text: str
    opening_text: str | None = None  # the topic's first post, when this post is a reply
    parent_text: str | None = None  # the post replied to, when there is one


def _header(source: PostSource) -> str:
    parts = [source.title, source.category]
    if source.tags:
        parts.append(", ".join(source.tags))
    return "".join(f"{part}\n\n" for part in parts if part)


def _clip(text: str, chars: int) -> str:
    text = " ".join(text.split())
    if len(text) <= chars:
        return text
    cut = text.rfind(" ", 0, chars)
    return text[: cut if cut > 0 else chars] + " …"


def strategy_text(source: PostSource, strategy: int) -> str:
    """The untruncated text a strategy embeds for a post."""
    if strategy == 1:
        return _header(source) + source.text
    if strategy == 2:
        parts = [source.title]
        if source.post_number > 1 and source.opening_text:
            parts.append(_clip(source.opening_text, CONTEXT_EXCERPT_CHARS))
        if source.parent_text:
            parts.append(_clip(source.parent_text, CONTEXT_EXCERPT_CHARS))
        parts.append(source.text)
        return "\n\n".join(p for p in parts if p)
    raise ValueError(f"unknown strategy {strategy}")


def prepare_text(source: PostSource, strategy: int, truncate: Callable[[str], str]) -> str:
    """The exact text handed to the embedder: the strategy text truncated by tokens.

    ``truncate`` comes from the model's tokenizer (it cuts to the model's budget). A model's own
    passage prefix is part of the model (its manifest and version), not of this text.
    """
    return truncate(strategy_text(source, strategy))


def digest(text: str) -> str:
    """sha1 hex of the exact embedded text (discourse-ai's digest rule)."""
    return hashlib.sha1(text.encode("utf-8")).hexdigest()
