"""Discourse's ``@mentions`` and ``#hashtags``: which text would come alive, and an inert form.

Discourse cooks a post with markdown-it and then, in every text token outside a link, applies its
"text post-process" rules (discourse-markdown-it: ``features/mentions.js``,
``hashtag-autocomplete.js``, ``text-post-process.js``):

* mention: ``@`` and a name of letters, digits, marks, ``_``, ``.`` and ``-`` (at most 60, ending
  in a letter or digit; only ASCII word characters unless ``unicode_usernames`` is on), or one
  character. It notifies the user, or every member of a group (``@admins``, ``@moderators``).
* hashtag: ``#`` and 1-101 of ``[\\u00C0-\\u1FFF\\u2C00-\\uD7FF\\w:-]`` (``#category``,
  ``#parent:child``, ``#tag::tag``). It prints the category or tag it resolves to.

Each counts only when the character before and after it is whitespace or punctuation (or the edge
of the token). Escaping does not help: markdown-it >= 13 turns ``\\@`` and ``&#64;`` back into a
plain ``@`` of the text token (``text_join``) before these rules run. Code would change how the
answer reads. The inert form is a zero-width non-joiner (U+200C) right after the ``@`` or ``#``:
the answer reads the same, and since U+200C is neither a letter, mark, digit nor in the hashtag
class, no name can start there and neither rule matches.
"""

from __future__ import annotations

import re
import unicodedata

from sidecar.core.markdown_syntax import code_spans, fenced_segments

INERT = "\u200c"  # zero-width non-joiner
MAX_NAME = 60
_HASHTAG = re.compile(r"#[\u00C0-\u1FFF\u2C00-\uD7FF0-9A-Za-z_:-]{1,101}")
_SIGIL = re.compile(r"[@#]")


def _alnum(ch: str) -> bool:
    """A letter, digit or mark: what a username may end with (Unicode usernames on)."""
    return ch.isalnum() or unicodedata.category(ch)[0] == "M"


def _boundary(ch: str) -> bool:
    """markdown-it's ``isWhiteSpace`` or ``isPunctChar`` (Unicode P and S)."""
    return ch.isspace() or unicodedata.category(ch)[0] in "PSZ"


def _mention_end(text: str, at: int) -> int | None:
    start = at + 1
    if start >= len(text) or not (_alnum(text[start]) or text[start] == "_"):
        return None
    end = j = start + 1
    while j < len(text) and j - start < MAX_NAME and (_alnum(text[j]) or text[j] in "._-"):
        j += 1
        if _alnum(text[j - 1]):
            end = j
    return end


def live_mentions(text: str) -> list[str]:
    """The mentions and hashtags Discourse would render in ``text``, one text token's content."""
    found: list[str] = []
    pos = 0
    while (m := _SIGIL.search(text, pos)) is not None:
        at = m.start()
        if text[at] == "@":
            end = _mention_end(text, at)
        else:
            tag = _HASHTAG.match(text, at)
            end = tag.end() if tag else None
        if end is None:
            pos = at + 1
            continue
        if (at == 0 or _boundary(text[at - 1])) and (end == len(text) or _boundary(text[end])):
            found.append(text[at:end])
        pos = end
    return found


def _could_start_name(sigil: str, ch: str) -> bool:
    # Over-approximated on purpose: an escape or an entity may decode to a name character.
    if ch in "\\&_" or _alnum(ch):
        return True
    return sigil == "#" and (ch in ":-" or "\u00c0" <= ch <= "\u1fff" or "\u2c00" <= ch <= "\ud7ff")


def _inert_text(text: str) -> str:
    out: list[str] = []
    last = 0
    for m in _SIGIL.finditer(text):
        at = m.end()
        after_word = m.start() > 0 and _alnum(text[m.start() - 1])  # "alice@example.org"
        if at < len(text) and not after_word and _could_start_name(m.group(), text[at]):
            out += [text[last:at], INERT]
            last = at
    return "".join(out) + text[last:]


def make_inert(markdown: str, keep_code: bool) -> str:
    """``markdown`` with a U+200C after every ``@`` or ``#`` that could start a mention or hashtag.

    Code blocks and code spans are left as written (Discourse never scans them) when
    ``keep_code``; otherwise the whole text is treated as prose.
    """
    parts: list[str] = []
    for is_code, segment in fenced_segments(markdown, keep_code):
        if is_code:
            parts.append(segment)
            continue
        spans = code_spans(segment) if keep_code else {}
        pieces: list[str] = []
        last = 0
        for start in sorted(spans):
            pieces += [_inert_text(segment[last:start]), segment[start:spans[start]]]
            last = spans[start]
        pieces.append(_inert_text(segment[last:]))
        parts.append("".join(pieces))
    return "\n".join(parts)
