"""PostgreSQL tsvector text (``search_data::text``) read back as positioned tokens per field.

Discourse's ``post_search_data.search_data`` holds the lexemes of a post as its text search
configuration made them, each with its positions and a weight per position: A the topic title,
B the category, C the tags, D the body. The keyword index stores exactly these tokens, at these
positions, one field per weight, so its words, stems and stop words are the forum's own.
"""

from __future__ import annotations

import re

# The field of each weight (a position without a letter is D).
FIELDS: dict[str, str] = {"A": "title", "B": "category", "C": "tags", "D": "body"}
# 'lexeme' (quotes doubled, backslashes escaped), then :positions, each with an optional weight.
_ENTRY = re.compile(r"'((?:[^'\\]|''|\\.)*)'(?::([0-9A-D,]+))?")
_POSITION = re.compile(r"(\d+)([A-D]?)")
_ESCAPE = re.compile(r"\\(.)")


def _unescape(text: str) -> str:
    text = text.replace("''", "'")
    return _ESCAPE.sub(r"\1", text) if "\\" in text else text


def field_tokens(text: str) -> dict[str, list[tuple[int, str]]]:
    """(position, lexeme) per field, by position; a lexeme stored without positions is one body
    token at position 0 (a stripped tsvector)."""
    fields: dict[str, list[tuple[int, str]]] = {}
    for entry in _ENTRY.finditer(text):
        lexeme = _unescape(entry[1])
        if entry[2] is None:
            fields.setdefault(FIELDS["D"], []).append((0, lexeme))
            continue
        for position in _POSITION.finditer(entry[2]):
            field = FIELDS[position[2] or "D"]
            fields.setdefault(field, []).append((int(position[1]), lexeme))
    for tokens in fields.values():
        tokens.sort()
    return fields
