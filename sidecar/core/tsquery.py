"""PostgreSQL tsquery text (``websearch_to_tsquery(...)::text``) as a small expression tree.

The keyword index is queried with the lexemes PostgreSQL's own parser produced, so the words,
stems and stop words are those of the forum's text search configuration; this module only reads
the operators back: ``'a'`` (a lexeme), ``!`` (not), ``<->`` / ``<N>`` (followed by, at distance
N), ``&`` (and), ``|`` (or), with that precedence, and parentheses.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeAlias

# Dashes that are punctuation, not the "-word" exclusion: a run of two or more ("--", a
# "-----BEGIN" banner, a "- -- -" separator), or one standing alone ("Proxmox - fan noise").
_LOOSE_DASHES = re.compile(r"-{2,}|(?<!\S)-(?!\S)")

# A quoted lexeme (quotes inside doubled, backslashes escaped), then its optional :* / weights.
_TOKEN = re.compile(r"\s*(?:'((?:[^'\\]|''|\\.)*)'(?::[*A-D]+)?|(<->|<\d+>|[!&|()]))")


@dataclass(frozen=True)
class Term:
    """One lexeme."""

    lexeme: str


@dataclass(frozen=True)
class Not:
    """Posts without the operand."""

    operand: Node


@dataclass(frozen=True)
class And:
    """Posts with every operand."""

    operands: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    """Posts with any operand."""

    operands: tuple[Node, ...]


@dataclass(frozen=True)
class Phrase:
    """Lexemes at fixed distances from the first one (``'a' <-> 'b' <2> 'c'``: 0, 1, 3)."""

    words: tuple[tuple[int, str], ...]


@dataclass(frozen=True)
class Follows:
    """``left <N> right`` where an operand is not a plain phrase (kept as: both present)."""

    left: Node
    right: Node
    distance: int


Node: TypeAlias = Term | Not | And | Or | Phrase | Follows


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text.replace("''", "'"))


def _tokens(text: str) -> list[str | Term]:
    out: list[str | Term] = []
    pos = 0
    text = text.rstrip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None:
            raise ValueError(f"not tsquery text at {pos}: {text[pos:pos + 20]!r}")
        pos = match.end()
        out.append(Term(_unescape(match[1])) if match[1] is not None else match[2])
    return out


class _Parser:
    """Precedence climbing over the tokens: | < & < <-> < !."""

    def __init__(self, tokens: list[str | Term]) -> None:
        self.tokens = tokens
        self.pos = 0

    def peek(self) -> str | Term | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self) -> str | Term:
        if self.pos >= len(self.tokens):
            raise ValueError("tsquery text ends too early")
        token = self.tokens[self.pos]
        self.pos += 1
        return token

    def parse_or(self) -> Node:
        parts = [self.parse_and()]
        while self.peek() == "|":
            self.take()
            parts.append(self.parse_and())
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def parse_and(self) -> Node:
        parts = [self.parse_follows()]
        while self.peek() == "&":
            self.take()
            parts.append(self.parse_follows())
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def parse_follows(self) -> Node:
        node = self.parse_not()
        while isinstance(op := self.peek(), str) and op.startswith("<"):
            self.take()
            distance = 1 if op == "<->" else int(op[1:-1])
            node = _follow(node, self.parse_not(), distance)
        return node

    def parse_not(self) -> Node:
        token = self.take()
        if token == "!":
            return Not(self.parse_not())
        if token == "(":
            node = self.parse_or()
            if self.take() != ")":
                raise ValueError("unbalanced parentheses in tsquery text")
            return node
        if isinstance(token, Term):
            return token
        raise ValueError(f"unexpected {token!r} in tsquery text")


def _words(node: Node) -> tuple[tuple[int, str], ...] | None:
    if isinstance(node, Term):
        return ((0, node.lexeme),)
    if isinstance(node, Phrase):
        return node.words
    return None


def _follow(left: Node, right: Node, distance: int) -> Node:
    # 'a' <-> 'b' <-> 'c' is parsed left to right: ('a' <-> 'b') <-> 'c', which PostgreSQL
    # reads as c one position after b.
    head, tail = _words(left), _words(right)
    if head is not None and tail is not None:
        shift = head[-1][0] + distance - tail[0][0]
        return Phrase(head + tuple((at + shift, word) for at, word in tail))
    return Follows(left, right, distance)


def parse_tsquery(text: str) -> Node | None:
    """The tree of a tsquery's text form; None for the empty query."""
    tokens = _tokens(text)
    if not tokens:
        return None
    parser = _Parser(tokens)
    node = parser.parse_or()
    if parser.peek() is not None:
        raise ValueError(f"unexpected {parser.peek()!r} in tsquery text")
    return node


def positive_lexemes(node: Node | None) -> list[str]:
    """The lexemes a match can be found by (not under a ``!``), in order, without repeats."""
    found: list[str] = []

    def walk(n: Node) -> None:
        if isinstance(n, Term):
            if n.lexeme not in found:
                found.append(n.lexeme)
        elif isinstance(n, Phrase):
            for _, word in n.words:
                if word not in found:
                    found.append(word)
        elif isinstance(n, (And, Or)):
            for child in n.operands:
                walk(child)
        elif isinstance(n, Follows):
            walk(n.left)
            walk(n.right)

    if node is not None:
        walk(node)
    return found


def websearch_text(query: str) -> str:
    """The question as ``websearch_to_tsquery`` should read it: only a dash written against a
    word ("-windows") excludes it.

    PostgreSQL reads a dash followed by a space as a negation of the next word too ("Proxmox -
    fan noise" excludes "fan"), drops words before a run of them ("a - -- - b" is ``!!!!'b'``)
    and fails on long runs ("tsquery stack too small", seen on a signed mail's dashes).
    """
    return _LOOSE_DASHES.sub(" ", query)


def as_words(node: Node) -> Node:
    """A plain question's OR of terms and phrases as an OR of every lexeme it holds, phrases
    split into their words, repeats kept (a hyphenated word's phrase, 'c-stat' <-> 'c' <->
    'state', becomes three words: its compound lexeme is the distinctive one)."""
    words: list[Node] = []

    def walk(n: Node) -> None:
        if isinstance(n, Term):
            words.append(n)
        elif isinstance(n, Phrase):
            words.extend(Term(word) for _, word in n.words)
        elif isinstance(n, (And, Or)):
            for child in n.operands:
                walk(child)
        elif isinstance(n, Follows):
            walk(n.left)
            walk(n.right)

    walk(node)
    return words[0] if len(words) == 1 else Or(tuple(words))


def rarest_words(node: Node, postings: Callable[[str], int], limit: int) -> Node:
    """A plain question's OR of words (``as_words``) cut to its ``limit`` rarest distinct words.

    ``postings`` says how many documents hold a word: a word none holds is dropped, and the
    ``limit`` held by the fewest are kept, repeats and order as asked. BM25 weighs a word less
    the more posts hold it, so a long question's common words (a pasted message of a hundred
    words) move its ranking little, and they are what its search costs: their postings are the
    longest. A question of ``limit`` words or fewer is searched as asked.
    """
    if not isinstance(node, Or):
        return node
    words = [t.lexeme for t in node.operands if isinstance(t, Term)]
    distinct = list(dict.fromkeys(words))
    if len(distinct) <= limit:
        return node
    held = {w: postings(w) for w in distinct}
    ranked = sorted((w for w in distinct if held[w] > 0), key=lambda w: held[w])
    keep = set(ranked[:limit])
    kept = tuple(t for t in node.operands if not isinstance(t, Term) or t.lexeme in keep)
    if not kept:  # no word is held anywhere: the search finds nothing either way
        return node
    return kept[0] if len(kept) == 1 else Or(kept)
