"""A CommonMark-aware scanner that rebuilds an LLM answer as inert Markdown plus allowed links.

Used by the citation sanitizer (``sidecar.core.sanitize``), which supplies the policy through
callbacks. Everything the scanner does not hand to a callback is emitted so that it cannot form
markup that links or embeds: ``[``, ``]``, ``<``, lone backslashes, stray backticks and
entity-encoded characters are escaped, raw HTML is dropped (the content of ``<script>``,
``<style>``, ``<iframe>``, ``<svg>``... with it), images are reduced to their alt text, and a
link is written only when the ``link`` callback returns a URL for it. Generated links are held as
private-use marker characters until the end, so that removing something next to them can
never splice text into a link, and ``finish`` (the bare-URL pass) never touches them.
``@mentions`` and ``#hashtags`` that Discourse would bring alive are made inert
(``sidecar.core.mentions``).

With ``keep_code`` the contents of fenced code blocks and code spans are kept verbatim (they
render as literal text); the sanitizer's final check catches any disagreement with a real
renderer, and it then runs again without ``keep_code``.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass

from sidecar.core.forum_links import strip_invisible
from sidecar.core.markdown_syntax import (
    ASCII_PUNCT,
    AUTOLINK,
    CITATION,
    DECLARATION,
    EMAIL_AUTOLINK,
    ENTITY,
    INLINE_TAGS,
    MAX_DECLARATION,
    MAX_DEPTH,
    MAX_DEST,
    MAX_LABEL,
    MAX_TAG,
    REF_DEF,
    TAG,
    WITH_CONTENT,
    bracket_pairs,
    code_spans,
    escape,
    fenced_segments,
    normalize_label,
    parse_destination,
)
from sidecar.core.mentions import make_inert

CitationFn = Callable[[list[int], str], list[tuple[str, str]]]
LinkFn = Callable[[str, str], "str | None"]
ReportFn = Callable[..., None]
FinishFn = Callable[[str, bool], str]  # (text, inside a written link)

_MARKER_BASE = 0xF0000  # generated links wait as private-use characters

@dataclass(frozen=True, slots=True)
class ScanOptions:
    """``keep_code``: keep code verbatim; ``links``: citations and forum links may be written."""

    keep_code: bool = True
    links: bool = True
    removed_text: str = "(link removed)"


class Scanner:
    """Rebuilds one text; callbacks decide citations and links, and hear what is removed."""

    def __init__(self, options: ScanOptions, *, citation: CitationFn, link: LinkFn,
                 report: ReportFn, finish: FinishFn) -> None:
        self.options = options
        self.citation = citation
        self.link = link
        self.report = report
        self.finish = finish
        self.chunks: list[str] = []
        self.refs: dict[str, str] = {}
        self.used_refs: set[str] = set()
        self._no_close: dict[str, int] = {}  # tag → position after which it never closes
        self._closers: dict[str, re.Pattern[str]] = {}

    # -- public --------------------------------------------------------------------------------
    def render(self, text: str) -> str:
        """The rebuilt text."""
        segments = fenced_segments(strip_invisible(text), self.options.keep_code)
        segments = [(code, part if code else self._take_definitions(part))
                    for code, part in segments]
        work = "\n".join(part if code else self._inline(part, self.options.links, 0)
                         for code, part in segments)
        for label, dest in self.refs.items():
            if label not in self.used_refs:
                self.report("link", dest, "unused reference definition removed")
        # Mentions and hashtags go inert last, once no removal can bring a new neighbour to an
        # "@" or "#"; written links still wait as markers, so their URLs are never touched.
        work = make_inert(self.finish(work, False), self.options.keep_code)
        return self._expand(work)

    # -- blocks --------------------------------------------------------------------------------
    def _take_definitions(self, text: str) -> str:
        """Remove link reference definitions, remembering their destinations."""
        def take(m: re.Match[str]) -> str:
            dest = m.group(2)
            dest = dest[1:-1] if dest.startswith("<") else dest
            label = normalize_label(m.group(1))
            if label in self.refs:
                self.report("link", dest, "duplicate reference definition removed")
            else:
                self.refs[label] = dest
            return ""
        return REF_DEF.sub(take, text)

    # -- inline --------------------------------------------------------------------------------
    def _chunk(self, markdown: str) -> str:
        self.chunks.append(markdown)
        return chr(_MARKER_BASE + len(self.chunks) - 1)

    def _expand(self, work: str) -> str:
        def chunk(m: re.Match[str]) -> str:
            text = self.chunks[ord(m.group(0)) - _MARKER_BASE]
            # "data:" + "(link removed)" would read as a URL again: keep them apart
            glued = m.start() and not work[m.start() - 1].isspace()
            if text == self.options.removed_text and glued:
                return " " + text
            return text
        return re.sub("[\U000f0000-\U000fffff]", chunk, work)

    def _reference(self, s: str, i: int, close: int, pairs: dict[int, int]
                   ) -> tuple[str, int] | None:
        """A full, collapsed or shortcut reference link ``[...]`` from ``i`` to ``close``."""
        if not self.refs:
            return None
        nxt = close + 1
        # Labels are measured before they are sliced: "[[[[...]]]]" must not copy O(n) each.
        if nxt < len(s) and s[nxt] == "[" and nxt in pairs:
            start, end = (nxt + 1, pairs[nxt]) if pairs[nxt] > nxt + 1 else (i + 1, close)
            if end - start > MAX_LABEL:
                return None
            label = s[start:end]
            key = normalize_label(label)
            if key in self.refs:
                self.used_refs.add(key)
                return self.refs[key], pairs[nxt] + 1
            return None
        if close - i - 1 > MAX_LABEL:
            return None
        key = normalize_label(s[i + 1:close])
        if key in self.refs:
            self.used_refs.add(key)
            return self.refs[key], close + 1
        return None

    def _html(self, s: str, i: int, out: list[str]) -> int | None:
        """Remove raw HTML at ``s[i] == "<"``; the index after it, or None if it is not HTML."""
        if s.startswith("<!--", i):
            # Once "-->" is missing after a point it is missing after every later "<!--" too:
            # remembered, so "<!--" repeated costs one search, not one per comment.
            end = -1 if i >= self._no_close.get("--", len(s) + 1) else s.find("-->", i + 4)
            if end == -1:
                self._no_close["--"] = min(i, self._no_close.get("--", i))
                return None
            self.report("html", s[i:end + 3], "HTML comment removed")
            return end + 3
        for pattern, limit in ((DECLARATION, MAX_DECLARATION), (TAG, MAX_TAG)):
            m = pattern.match(s, i, min(len(s), i + limit))
            if m is None:
                continue
            tag = (m.group(1) or "").lower() if pattern is TAG else ""
            end = m.end()
            if tag in WITH_CONTENT and not s.startswith("</", i):
                closed = self._closing(s, tag, end)
                if closed is not None:
                    self.report("html", s[i:closed], f"<{tag}> removed with its content")
                    return closed
            self.report("html", m.group(0), "raw HTML is not allowed")
            if tag not in INLINE_TAGS:
                out.append(" ")
            return end
        return None

    def _closing(self, s: str, tag: str, start: int) -> int | None:
        if start >= self._no_close.get(tag, len(s) + 1):
            return None
        closer = self._closers.get(tag)
        if closer is None:
            closer = self._closers[tag] = re.compile(rf"</{tag}\s*>", re.IGNORECASE)
        m = closer.search(s, start)
        if m is None:
            self._no_close[tag] = min(start, self._no_close.get(tag, start))
            return None
        return m.end()

    def _inline(self, s: str, allow: bool, depth: int) -> str:
        """Rebuild one block of text (no fenced code in it)."""
        code = code_spans(s) if self.options.keep_code else {}
        pairs = bracket_pairs(s, code)
        out: list[str] = []
        i, n = 0, len(s)
        while i < n:
            c = s[i]
            if c == "\\":
                if i + 1 < n and (s[i + 1] in ASCII_PUNCT or s[i + 1] == "\n"):
                    out.append(s[i:i + 2])
                    i += 2
                else:
                    out.append("\\\\")
                    i += 1
            elif c == "`":
                if i in code:
                    out.append(s[i:code[i]])
                    i = code[i]
                else:
                    out.append("\\`")
                    i += 1
            elif c == "<":
                i = self._angle(s, i, out, allow)
            elif c == "&":
                m = ENTITY.match(s, i)
                if m:
                    out.append(escape(strip_invisible(html.unescape(m.group(0)))))
                    i = m.end()
                else:
                    out.append("&")
                    i += 1
            elif c == "[":
                i = self._bracket(s, i, pairs, out, allow, depth, image=False)
            elif c == "!" and s.startswith("[", i + 1) and (i + 1) in pairs:
                i = self._bracket(s, i + 1, pairs, out, allow, depth, image=True)
            elif c == "]":
                out.append("\\]")
                i += 1
            else:
                out.append(c)
                i += 1
        return "".join(out)

    def _angle(self, s: str, i: int, out: list[str], allow: bool) -> int:
        for pattern in (AUTOLINK, EMAIL_AUTOLINK):
            m = pattern.match(s, i, min(len(s), i + MAX_DEST))
            if m is None:
                continue
            dest = m.group(1) if pattern is AUTOLINK else f"mailto:{m.group(1)}"
            url = self.link(dest, "link") if allow else None
            if url is not None:
                out.append(self._chunk(f"[{escape(url)}]({url})"))
            else:
                if not allow:
                    self.report("link", dest, "links are not allowed here")
                out.append(self._chunk(self.options.removed_text))
            return m.end()
        end = self._html(s, i, out)
        if end is not None:
            return end
        out.append("\\<")
        return i + 1

    def _bracket(self, s: str, i: int, pairs: dict[int, int], out: list[str], allow: bool,
                 depth: int, *, image: bool) -> int:
        """``[`` at ``i``: a citation, a link, an image (``!`` before it) or plain text."""
        if not image:
            m = CITATION.match(s, i)
            if m is not None:
                if not allow:
                    out.append(escape(m.group(0)))
                    return m.end()
                numbers = [int(x) for x in re.findall(r"\d+", m.group(1))]
                links = self.citation(numbers, m.group(0))
                if links:
                    out.append(self._chunk(", ".join(f"[{t}]({u})" for t, u in links)))
                elif out and out[-1].endswith(" "):
                    out[-1] = out[-1][:-1]  # "text [[9]]." reads "text." once [[9]] is gone
                return m.end()
        close = pairs.get(i)
        if close is None or depth >= MAX_DEPTH:
            out.append("!\\[" if image else "\\[")
            return i + 1
        found: tuple[str, int] | None = None
        if close + 1 < len(s) and s[close + 1] == "(":
            found = parse_destination(s, close + 1)
        if found is None:
            found = self._reference(s, i, close, pairs)
        if found is None:
            out.append("!\\[" if image else "\\[")
            return i + 1
        dest, end = found
        inner = s[i + 1:close]
        kind = "image" if image else "link"
        url = self.link(dest, kind) if allow else None
        if url is None:
            if not allow:
                self.report("link", dest, "links are not allowed here")
            out.append(self._inline(inner, allow, depth + 1))
            return end
        text = self.finish(self._inline(inner, False, depth + 1), True).strip() or escape(url)
        out.append(self._chunk(f"[{text}]({url})"))
        return end
