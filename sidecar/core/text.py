"""Turning forum posts into plain text: cooking Markdown, stripping HTML, cutting excerpts."""

from __future__ import annotations

import re
import unicodedata
from html.parser import HTMLParser

from markdown_it import MarkdownIt

# Discourse quotes: [quote="alice, post:2, topic:17"] ... [/quote]
_QUOTE_OPEN = re.compile(r"\[quote(?:=\"?([^\]\"]*)\"?)?\]", re.IGNORECASE)
_QUOTE_CLOSE = re.compile(r"\[/quote\]", re.IGNORECASE)

_BLOCK_TAGS = frozenset(
    """address article aside blockquote br dd details div dl dt figcaption figure footer h1 h2 h3
    h4 h5 h6 header hr li main nav ol p pre section summary table td th tr ul""".split()
)
_SKIP_TAGS = frozenset({"script", "style", "template", "noscript"})
_VOID_TAGS = frozenset({"br", "hr", "img", "input", "meta", "link", "source", "wbr"})

_md = MarkdownIt("commonmark", {"html": True, "linkify": False}).enable(
    ["table", "strikethrough"]
)


def _quote_open(match: re.Match[str]) -> str:
    attrs = ""
    if match.group(1):
        parts = [p.strip() for p in match.group(1).split(",")]
        attrs = f' data-username="{_attr(parts[0])}"'
        for part in parts[1:]:
            key, _, value = part.partition(":")
            if key.strip() in {"post", "topic"} and value.strip().isdigit():
                attrs += f' data-{key.strip()}="{value.strip()}"'
    # Blank lines around the HTML block let Markdown inside the quote render as Markdown.
    return f'\n\n<aside class="quote"{attrs}>\n<blockquote>\n\n'


def _attr(value: str) -> str:
    return value.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")


def cook(raw: str) -> str:
    """Render a post's Markdown (with Discourse quote BBCode) to HTML, like Discourse's cooked."""
    text = _QUOTE_OPEN.sub(_quote_open, raw)
    text = _QUOTE_CLOSE.sub("\n\n</blockquote>\n</aside>\n\n", text)
    return _md.render(text)


# Line-level blocks get one line break; other blocks a blank line.
_LINE_TAGS = frozenset({"br", "li", "tr", "dt", "dd"})


class _TextExtractor(HTMLParser):
    def __init__(self, drop_quotes: bool) -> None:
        super().__init__(convert_charrefs=True)
        self.drop_quotes = drop_quotes
        self.parts: list[str] = []
        self.stack: list[str] = []
        self.skip_depth = 0
        self.pending_break = 0  # line breaks owed before the next text

    def _skipping_tag(self, tag: str, attrs: list[tuple[str, str | None]]) -> bool:
        if tag in _SKIP_TAGS:
            return True
        if not self.drop_quotes:
            return False
        if tag == "blockquote":
            return True
        classes = dict(attrs).get("class") or ""
        return tag == "aside" and "quote" in classes.split()

    def _break(self, tag: str) -> None:
        if tag in _BLOCK_TAGS and not self.skip_depth:
            self.pending_break = max(self.pending_break, 1 if tag in _LINE_TAGS else 2)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _VOID_TAGS:
            self._break(tag)
            return
        self.stack.append(tag)
        if self.skip_depth or self._skipping_tag(tag, attrs):
            self.skip_depth += 1
            return
        self._break(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in _VOID_TAGS or tag not in self.stack:
            return
        # Close up to the matching tag: cooked HTML is well-formed, user HTML may not be.
        while self.stack:
            open_tag = self.stack.pop()
            if self.skip_depth:
                self.skip_depth -= 1
            else:
                self._break(open_tag)
            if open_tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.skip_depth:
            return
        if not data.strip():
            # Whitespace between blocks is layout, not content.
            if not self.pending_break and self.parts:
                self.parts.append(" ")
            return
        if self.pending_break and self.parts:
            self.parts.append("\n" * self.pending_break)
        self.pending_break = 0
        # A soft line break in a paragraph reads as a space; code keeps its lines.
        self.parts.append(data if "pre" in self.stack else data.replace("\n", " "))


def html_to_text(html: str, *, drop_quotes: bool = False) -> str:
    """Plain text of an HTML fragment: block elements become line breaks, whitespace collapsed.

    With ``drop_quotes`` the text of quoted posts is removed (evidence must show what this post
    says, not what it quotes).
    """
    parser = _TextExtractor(drop_quotes)
    parser.feed(html)
    parser.close()
    return normalize_whitespace("".join(parser.parts))


_SPACES = re.compile(r"[ \t\f\v\u00a0]+")
_BLANK_LINES = re.compile(r"\n\s*\n+")


def normalize_whitespace(text: str) -> str:
    """Collapse runs of spaces, trim lines and keep at most one blank line between blocks."""
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    lines = [_SPACES.sub(" ", line).strip() for line in text.split("\n")]
    return _BLANK_LINES.sub("\n\n", "\n".join(lines)).strip()


def raw_to_text(raw: str, *, drop_quotes: bool = False) -> str:
    """Plain text of a post's Markdown source."""
    return html_to_text(cook(raw), drop_quotes=drop_quotes)


_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = frozenset(
    """a an and are as at be but by can do does for from has have how i if in is it its me my no
    not of on or so that the their there this to was what when where which who why will with
    you your au aux avec ce ces comment dans de des du elle en est et il ils je la le les leur
    mais me mon ne nous on ou par pas pour qu que qui sa se ses son sur ta te tu un une vos
    votre vous""".split()
)


def query_terms(query: str) -> set[str]:
    """Distinctive lower-cased words of a query (stop words and 1-2 letter words dropped)."""
    return {
        w for w in (m.group(0).casefold() for m in _WORD.finditer(query))
        if len(w) > 2 and w not in _STOP
    }


class TermMatcher:
    """The query term a word of the text counts as, if any: the same word, or a cheap stem
    ("renewal" ~ "renew", "visas" ~ "visa"): a shared 5-letter prefix, or one word a prefix of
    the other with 4 letters or more.

    Every stem a term admits is looked up in a table built once per query, so matching a long
    post against a long question costs a few lookups per word of the post, not one comparison
    per term (a 20,000-character post and a 150-word question: 3,000 words, not 450,000 pairs).
    """

    def __init__(self, terms: set[str]) -> None:
        self.terms = terms
        self.by_prefix5: dict[str, str] = {}
        self.by_prefix: dict[str, str] = {}  # a prefix of 4+ letters of a term -> that term
        # Every match but a 3-letter word's shares its first 4 letters with the term.
        self.first4 = {term[:4] for term in terms if len(term) >= 4}
        for term in sorted(terms):  # sorted: the same term wins whatever the set's order
            if len(term) >= 5:
                self.by_prefix5.setdefault(term[:5], term)
            if len(term) >= 4:
                for end in range(4, len(term) + 1):
                    self.by_prefix.setdefault(term[:end], term)

    def match(self, word: str) -> str | None:
        """The term ``word`` (casefolded) counts as, or None."""
        if word in self.terms:
            return word
        if len(word) < 4 or word[:4] not in self.first4:
            return None
        if len(word) >= 5 and word[:5] in self.by_prefix5:
            return self.by_prefix5[word[:5]]
        if word in self.by_prefix:  # the word is a prefix of a term
            return self.by_prefix[word]
        for end in range(len(word) - 1, 3, -1):  # a term is a prefix of the word
            if word[:end] in self.terms:
                return word[:end]
        return None


def excerpt(text: str, query: str, size: int = 320) -> str:
    """A window of about ``size`` characters of ``text`` around its best match for ``query``.

    Among runs of query-term matches that fit in ``size`` characters, the one with the most
    distinct terms wins (earliest on ties); the window is centred on it, moved back to a sentence
    start when one is close, cut on word boundaries and marked with ellipses where text continues.
    """
    text = " ".join(text.split())
    if len(text) <= size:
        return text
    start = 0
    terms = query_terms(query)
    matcher = TermMatcher(terms)
    matches = []
    for word in _WORD.finditer(text):
        term = matcher.match(word.group(0).casefold()) if terms else None
        if term:
            matches.append((word.start(), word.end(), term))
    if matches:
        best, best_i, best_j = 0, 0, 0
        counts: dict[str, int] = {}
        j = 0
        for i, (first, _, term) in enumerate(matches):
            while j < len(matches) and matches[j][1] - first <= size:
                counts[matches[j][2]] = counts.get(matches[j][2], 0) + 1
                j += 1
            if len(counts) > best:
                best, best_i, best_j = len(counts), i, j
            counts[term] -= 1
            if not counts[term]:
                del counts[term]
        first, last = matches[best_i][0], matches[best_j - 1][1]
        start = max(0, min((first + last - size) // 2, len(text) - size))
        sentence = max(text.rfind(". ", start - size // 4, first + 1),
                       text.rfind("? ", start - size // 4, first + 1))
        if sentence != -1 and sentence + 2 <= first:
            start = sentence + 2
        elif start > 0:
            space = text.rfind(" ", 0, start + 1)
            start = space + 1 if space != -1 else start
    end = min(len(text), start + size)
    if end < len(text):
        cut = text.rfind(" ", start, end)
        end = cut if cut > start else end
    snippet = text[start:end].strip()
    prefix = "… " if start > 0 else ""
    suffix = " …" if end < len(text) else ""
    return f"{prefix}{snippet}{suffix}"
