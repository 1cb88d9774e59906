"""Turning a conversation into one standalone search query: the pure parts.

Retrieval that only sees the last message fails on follow-ups ("and for the other one?"). The
LLM rewrite (the *condense question* pattern) lives in ``sidecar.answer.condense``; this module
holds what needs no I/O: which turns are sent, the prompt, the cache key, the cleaning of the
model's output, and the no-LLM fallback used when the model cannot be asked.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Role = Literal["user", "assistant"]

# Bump when the prompt changes: cached rewrites made with another prompt are not reused.
PROMPT_VERSION = 1
# Previous turns can be long assistant answers; each is cut to this many characters in the prompt.
TURN_CHARS = 1200
# A message of fewer words than this leans on the previous one for its meaning.
SHORT_WORDS = 5
# Pronouns make a longer follow-up lean on the previous turn only up to this many words.
PRONOUN_WORDS = 12

SYSTEM_PROMPT = (
    "You rewrite the latest message of a conversation with a forum's assistant as ONE standalone "
    "search query for the forum's search engine. Resolve pronouns and references (\"it\", "
    "\"the other one\", \"et pour\", \"celui-là\") using the previous turns. Keep the "
    "conversation's language, keep product names, versions and error messages exactly. Do not "
    "answer the question, do not explain, do not add quotes. Output only the query, on one line."
)


@dataclass(frozen=True, slots=True)
class Turn:
    """One message of the conversation."""

    role: Role
    content: str


def normalize(text: str) -> str:
    """Case- and whitespace-insensitive form used in cache keys."""
    return " ".join(text.split()).casefold()


def window(turns: Sequence[Turn], max_previous: int) -> list[Turn]:
    """The latest message and up to ``max_previous`` messages before it (empty ones dropped)."""
    latest = turns[-1]
    previous = [t for t in turns[:-1] if t.content.strip()]
    kept = previous[-max_previous:] if max_previous > 0 else []
    return [*kept, latest]


def cache_key(turns: Sequence[Turn], model: str) -> str:
    """sha1 of the normalized turns actually sent, the model and the prompt version."""
    payload = json.dumps(
        {"v": PROMPT_VERSION, "model": model,
         "turns": [[t.role, normalize(t.content[:TURN_CHARS])] for t in turns]},
        ensure_ascii=False, separators=(",", ":"),
    )
    return hashlib.sha1(payload.encode("utf-8")).hexdigest()


def build_messages(turns: Sequence[Turn]) -> list[dict[str, str]]:
    """The chat request: the instruction as system prompt, the transcript as one user message.

    The transcript is quoted rather than replayed as chat turns, so the model rewrites the last
    question instead of answering it.
    """
    lines = []
    for turn in turns[:-1]:
        who = "Member" if turn.role == "user" else "Assistant"
        lines.append(f"{who}: {_one_line(turn.content)[:TURN_CHARS]}")
    lines.append(f"Latest member message: {_one_line(turns[-1].content)}")
    transcript = "\n".join(lines)
    return [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": f"{transcript}\n\nStandalone search query:"},
    ]


def _one_line(text: str) -> str:
    return " ".join(text.split())


_THINK = re.compile(r"<think>.*?(?:</think>|$)", re.IGNORECASE | re.DOTALL)
_LABEL = re.compile(
    r"^(?:standalone\s+)?(?:search\s+)?(?:query|question|requête|requete|recherche)\s*:\s*",
    re.IGNORECASE,
)
_QUOTES = "\"'`«»“”‘’ "


def clean_output(text: str, *, max_chars: int) -> str | None:
    """The query in a model's reply, or None when the reply is not usable.

    Reasoning models may prepend ``<think>...</think>`` (even with ``think: false`` some builds
    do); labels ("Query:"), quotes and extra lines are dropped. Empty or absurdly long output is
    refused, and the caller falls back.
    """
    text = _THINK.sub("", text)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return None
    query = _LABEL.sub("", lines[0]).strip().strip(_QUOTES).strip()
    query = " ".join(query.split())
    if not query or len(query) > max_chars or "<think>" in query.lower():
        return None
    return query


# Follow-ups that lean on the previous turn (English and French).
_LEADING = re.compile(
    r"^(?:and|but|also|or|so|plus|what\s+about|how\s+about|same\s+for|"
    r"et|mais|aussi|ou|donc|alors|sinon|pareil|idem|et\s+pour|et\s+si|et\s+avec|et\s+sur)\b",
    re.IGNORECASE,
)
_DEICTIC = re.compile(
    r"\b(?:that\s+one|this\s+one|the\s+other(?:\s+one)?|the\s+same|the\s+former|the\s+latter|"
    r"the\s+first\s+one|the\s+second\s+one|same\s+thing|"
    r"celui-(?:la|là|ci)|celle-(?:la|là|ci)|ceux-(?:la|là|ci)|celles-(?:la|là|ci)|"
    r"le\s+même|la\s+même|les\s+mêmes|l'autre|l’autre|les\s+autres|ce\s+dernier|cette\s+dernière|"
    r"pareil)\b",
    re.IGNORECASE,
)
_PRONOUN = re.compile(
    r"\b(?:it|its|it's|that|this|these|those|them|they|one|ones|ça|ca|cela|ceci|lui|leur)\b",
    re.IGNORECASE,
)
_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True, slots=True)
class Fallback:
    """The no-LLM query and the rule that built it."""

    query: str
    rule: Literal["latest", "joined_short", "joined_reference"]


def leans_on_previous(text: str) -> str | None:
    """Why a message cannot stand alone ("short" or "reference"), or None if it can."""
    words = _WORD.findall(text)
    if len(words) < SHORT_WORDS:
        return "short"
    if _LEADING.search(text.strip()) or _DEICTIC.search(text):
        return "reference"
    # "it" may be an expletive ("is it possible to ..."): pronouns count only in short messages.
    if len(words) <= PRONOUN_WORDS and _PRONOUN.search(text):
        return "reference"
    return None


def fallback_query(turns: Sequence[Turn], *, max_chars: int) -> Fallback:
    """The latest message, joined after the previous member message when it leans on it.

    Joining keeps the previous question's subject ("WireGuard on a VPS") next to the follow-up
    ("and for the other one?"), which is what a rewrite would have restored.
    """
    latest = _one_line(turns[-1].content)
    why = leans_on_previous(latest)
    previous = next((_one_line(t.content) for t in reversed(turns[:-1])
                     if t.role == "user" and t.content.strip()), None)
    if why is None or previous is None:
        return Fallback(latest[:max_chars], "latest")
    room = max_chars - len(latest) - 1
    if room <= 0:
        return Fallback(latest[:max_chars], "latest")
    joined = f"{previous[-room:] if len(previous) > room else previous} {latest}"
    return Fallback(joined, "joined_short" if why == "short" else "joined_reference")
