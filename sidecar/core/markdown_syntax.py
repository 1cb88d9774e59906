"""CommonMark syntax the sanitizer's scanner needs: patterns, escapes, code, brackets, links.

Pure functions of a string, each following the CommonMark rule it names, bounded so that no input
makes them quadratic (limits below); ``sidecar.core.markdown_scan`` drives them.
"""

from __future__ import annotations

import bisect
import re

ASCII_PUNCT = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
FENCE_OPEN = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
BLANK_LINE = re.compile(r"\n[ \t]*\n")
CITATION = re.compile(r"\[\[[ \t]*(\d{1,9}(?:[ \t]*[,;][ \t]*\d{1,9}){0,49})[ \t]*,?[ \t]*\]\]")
REF_DEF = re.compile(
    r"^ {0,3}\[((?:[^\[\]\\\n]|\\.){1,999})\]:[ \t]*\n?[ \t]*(<[^<>\n]*>|\S+)"
    r"(?:[ \t]+(?:\"[^\"\n]*\"|'[^'\n]*'|\([^()\n]*\)))?[ \t]*$",
    re.MULTILINE,
)
AUTOLINK = re.compile(r"<([A-Za-z][A-Za-z0-9+.\-]{1,31}:[^\s<>]*)>")
EMAIL_AUTOLINK = re.compile(r"<([^\s<>@\\]+@[^\s<>\\]+)>")
TAG = re.compile(
    r"</?([A-Za-z][A-Za-z0-9\-]*)"
    r"(?:\s+[^\s\"'=<>`/]+(?:\s*=\s*(?:[^\s\"'=<>`]+|'[^']*'|\"[^\"]*\"))?)*\s*/?>"
)
DECLARATION = re.compile(r"<(?:![A-Za-z][^>]*|\?.*?\?|!\[CDATA\[.*?\]\])>", re.DOTALL)
ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
WITH_CONTENT = frozenset(
    "script style iframe object embed svg math template noscript textarea title xmp plaintext "
    "noembed noframes frameset applet select".split()
)
INLINE_TAGS = frozenset("a abbr b bdi bdo cite code del dfn em font i ins kbd mark q s samp "
                         "small span strike strong sub sup tt u var".split())
MAX_TAG = 4096
MAX_DECLARATION = 1024
MAX_DEST = 2048
MAX_LABEL = 999  # CommonMark's limit on reference labels
MAX_DEPTH = 8  # links inside link text, deeper than this, stay plain text
MAX_PAREN_DEPTH = 32  # markdown-it's limit on nested parentheses in a link destination
# A run of destination characters that need no decision (no escape, parenthesis, space, control).
_DEST_RUN = re.compile(r"[^\\()\s\x00-\x1f]+")


def escape(text: str) -> str:
    """Characters that could open markup, escaped (for text that did not come from markup)."""
    out = []
    for ch in text:
        if ch in "[]<\\`&":
            out.append("\\" + ch)
        elif ch == "\n":
            out.append(" ")
        else:
            out.append(ch)
    return "".join(out)


def normalize_label(text: str) -> str:
    return " ".join(text.split()).casefold()


def fenced_segments(text: str, keep_code: bool) -> list[tuple[bool, str]]:
    """(is_code, text) pieces: fenced code blocks and the rest."""
    if not keep_code:
        return [(False, text)]
    lines = text.split("\n")
    segments: list[tuple[bool, str]] = []
    buffer: list[str] = []
    i = 0
    while i < len(lines):
        m = FENCE_OPEN.match(lines[i])
        if m and (m.group(2)[0] == "~" or "`" not in m.group(3)):
            if buffer:
                segments.append((False, "\n".join(buffer)))
                buffer = []
            close = re.compile(rf"^ {{0,3}}{re.escape(m.group(2)[0])}{{{len(m.group(2))},}}"
                               r"[ \t]*$")
            j = i + 1
            while j < len(lines) and not close.match(lines[j]):
                j += 1
            segments.append((True, "\n".join(lines[i:j + 1])))
            i = j + 1
        else:
            buffer.append(lines[i])
            i += 1
    if buffer:
        segments.append((False, "\n".join(buffer)))
    return segments



def code_spans(s: str) -> dict[int, int]:
    """Start → end of every code span, CommonMark style (a run closes on an equal run)."""
    runs = [(m.start(), m.end()) for m in re.finditer(r"`+", s)]
    by_length: dict[int, list[int]] = {}
    for k, (start, end) in enumerate(runs):
        by_length.setdefault(end - start, []).append(k)
    blanks = [m.start() for m in BLANK_LINE.finditer(s)]
    spans: dict[int, int] = {}
    k = 0
    while k < len(runs):
        start, end = runs[k]
        backslashes = 0
        while start - backslashes > 0 and s[start - backslashes - 1] == "\\":
            backslashes += 1
        if backslashes % 2:
            start += 1  # the first backtick is escaped
        same = by_length.get(end - start, []) if end > start else []
        pos = bisect.bisect_right(same, k)
        if pos < len(same):
            closer = same[pos]
            blank = bisect.bisect_left(blanks, start)
            # A code span never crosses a blank line (it would end the paragraph).
            if blank >= len(blanks) or blanks[blank] > runs[closer][0]:
                spans[start] = runs[closer][1]
                k = closer + 1
                continue
        k += 1
    return spans



def bracket_pairs(s: str, code: dict[int, int]) -> dict[int, int]:
    """Index of the ``]`` matching each ``[`` (escapes and code spans skipped)."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    i = 0
    n = len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if i in code:
            i = code[i]
            continue
        if c == "[":
            stack.append(i)
        elif c == "]" and stack:
            pairs[stack.pop()] = i
        elif c == "\n" and BLANK_LINE.match(s, i):
            stack.clear()
        i += 1
    return pairs



def parse_destination(s: str, i: int) -> tuple[str, int] | None:
    """Parse ``(dest "title")`` starting at ``s[i] == "("``; (dest, end) or None."""
    n = len(s)
    j = i + 1
    while j < n and s[j] in " \t\n":
        j += 1
    if j < n and s[j] == "<":
        end = s.find(">", j + 1, j + MAX_DEST)
        if end == -1 or "\n" in s[j + 1:end] or "<" in s[j + 1:end]:
            return None
        dest, j = s[j + 1:end], end + 1
    else:
        # Plain runs are skipped at C speed and nesting stops at markdown-it's limit, so a scan
        # costs at most MAX_PAREN_DEPTH steps plus escapes: "[a](" repeated stays linear.
        start, depth = j, 0
        limit = min(n, start + MAX_DEST)
        while j < limit:
            run = _DEST_RUN.match(s, j, limit)
            if run is not None:
                j = run.end()
                continue
            c = s[j]
            if c == "\\":
                j += 2 if j + 1 < n else 1
                continue
            if c == "(":
                depth += 1
                if depth > MAX_PAREN_DEPTH:
                    return None
            elif c == ")" and depth:
                depth -= 1
            else:
                break  # a space, a control character, or the closing ")"
            j += 1
        if depth or j - start >= MAX_DEST:
            return None
        dest = s[start:j]
    while j < n and s[j] in " \t\n":
        j += 1
    if j < n and s[j] in "\"'(":
        closing = ")" if s[j] == "(" else s[j]
        end = s.find(closing, j + 1, j + MAX_DEST)
        if end == -1:
            return None
        j = end + 1
        while j < n and s[j] in " \t\n":
            j += 1
    if j < n and s[j] == ")":
        return dest, j + 1
    return None
