"""Which URLs point into the forum, and where URL-like text hides in an answer.

Pure helpers of the citation sanitizer (``sidecar.core.sanitize``). Two questions:

* :func:`resolve_forum_target`: does a link destination (from Markdown, HTML or plain text) lead
  to a topic or post of *this* forum? Hosts are compared after NFKC and IDNA (UTS 46) mapping, as
  a browser would resolve them, so fullwidth or Cyrillic look-alikes, userinfo tricks
  (``https://forum.example.org@evil.example``), other ports and encoded paths never pass.
* :func:`find_urlish`: where in a text is something a renderer could turn into a link (schemes,
  ``//host``, ``www.``, ``host.tld/path``, e-mail addresses, bare domains with a linkified TLD)?
  Detection runs on a per-character NFKC + casefold view of the text, so look-alike spellings of
  ``http://`` or ``javascript:`` are found too.
"""

from __future__ import annotations

import html
import re
import unicodedata
from bisect import bisect_right
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

import idna
from linkify_it import LinkifyIt

from sidecar.core.markdown_syntax import ASCII_PUNCT

# Characters that render as nothing (or reorder text) and serve only to hide a scheme or host from
# a filter: C0/C1 controls (tab and newline excepted), soft hyphen, zero-width and bidi controls,
# variation selectors, the BOM, interlinear annotations, tag characters; private-use characters
# are dropped too (the sanitizer uses some internally as markers).
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5"
    "\u180b-\u180f\u200b-\u200f\u202a-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0"
    "\ufff0-\ufffb\ue000-\uf8ff\U000e0000-\U000e0fff\U000f0000-\U0010ffff]"
)

# TLDs a Discourse forum linkifies in bare text (its ``markdown_linkify_tlds`` setting, default
# list) plus common generic ones. Two-letter country codes that are also file extensions
# (.md, .sh, .py, .rs, .pl ...) are left out on purpose: "README.md" is not a link. A host followed
# by a path ("evil.example/setup") is caught whatever its TLD.
LINKIFY_TLDS: tuple[str, ...] = (
    "com", "net", "org", "io", "onion", "co", "tv", "ru", "cn", "us", "uk", "me", "de", "fr",
    "fi", "gov", "edu", "info", "biz", "xyz", "app", "dev", "eu", "be", "ca", "ch", "nl", "es",
    "it", "jp", "br", "au", "in", "top", "site", "online", "shop", "club", "live", "link",
    "click", "zip", "mov", "example",
)

# Schemes that make a link without "//" (browsers and linkifiers accept them as is).
_PSEUDO_SCHEMES = (
    "javascript|vbscript|livescript|data|file|blob|mailto|tel|sms|callto|about|view-source|"
    "filesystem|jar|intent|mhtml|ms-[a-z-]+|https?|ftps?|wss?"
)
# A URL ends at whitespace, a backslash, quotes, angle or square brackets or a backtick (the
# view maps the sanitizer's markers to spaces, so they end URLs too).
_URL_CHARS = r"[^\s\\\"'<>`\[\]]"
_PATTERNS = (
    # scheme://anything, wherever it starts ("x.http://", "evil.examplehttps://"): a renderer
    # may find the URL inside a longer word, so the whole word goes
    re.compile(rf"[a-z][a-z0-9+.\-]{{0,30}}:/{{2,}}{_URL_CHARS}*"),
    # javascript:..., data:..., http:evil.example ... (no "//" needed; "metadata:" is a word)
    re.compile(rf"(?<![^\W_])(?:{_PSEUDO_SCHEMES}):{_URL_CHARS}+"),
    # a script scheme runs even with spaces after the colon ("javascript: alert(1)")
    re.compile(rf"(?<![^\W_])(?P<keep>(?:javascript|vbscript|livescript):)[ \t]*{_URL_CHARS}*"),
    # protocol-relative //host... (linkify-it takes even "//www.|" for a link: anything that
    # starts like a host after "//" goes; "// comment" stays)
    re.compile(rf"(?<![^\W_]|:)//[^\W_]{_URL_CHARS}*"),
    # www.anything
    re.compile(rf"(?<![^\W_])www\d{{0,3}}\.[\w\-]+(?:\.[\w\-]+)*{_URL_CHARS}*"),
    # host.tld/path or host.tld:port ("_" is not part of a host: "_evil.com_" is emphasis)
    re.compile(
        rf"(?<![^\W_]|[.\-@/])(?:[^\W_][\w\-]*\.)+[^\W\d_][\w\-]*(?::\d{{1,5}})?/"
        rf"{_URL_CHARS}*"
    ),
    re.compile(r"(?<![^\W_]|[.\-@/])(?:[^\W_][\w\-]*\.)+[^\W\d_][\w\-]*:\d{1,5}\b"),
)
_LINKIFY_BLANKS = re.compile(r"[\s\\\"'<>`_*~|]")
# hyphens and dots count only inside a host ("--evil.com", "_.evil.com"); "@" goes too, so
# that the host of "_@evil.com" is seen
_NOT_HOST = re.compile(r"[^\w.\-]|_|(?<![^\W_])[.\-]|[.\-](?![^\W_])")
_TRAILING = ".,;:!?'\"*_~"
_CLOSERS = {")": "(", "]": "[", "}": "{", ">": "<"}


def strip_invisible(text: str) -> str:
    """Normalise line ends and drop invisible and control characters (tab and newline stay)."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _INVISIBLE.sub("", text)


def normalize_host(host: str) -> str | None:
    """The ASCII form a browser would connect to (IDNA UTS 46), or None if it is not a host."""
    host = unicodedata.normalize("NFKC", unquote(host)).casefold().rstrip(".")
    if not host:
        return None
    if host.startswith("[") and host.endswith("]"):
        return host  # IPv6 literal
    try:
        return idna.encode(host, uts46=True, transitional=False).decode("ascii")
    except (idna.IDNAError, UnicodeError, ValueError):
        return None


_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class ForumSite:
    """The forum's address: ``base`` prefixes every link (empty: links are relative)."""

    base: str = ""
    scheme: str | None = None
    host: str | None = None
    port: int | None = None
    prefix: str = ""  # a sub-folder install: "/forum"

    @classmethod
    def parse(cls, forum_url: str) -> ForumSite:
        """Read ``settings.forum_url``; raise ValueError if it is not an http(s) base URL."""
        base = forum_url.strip().rstrip("/")
        if not base:
            return cls()
        parts = urlsplit(base)
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS or not parts.hostname or parts.username is not None:
            raise ValueError(f"forum_url must be an http(s) URL without credentials: {base!r}")
        host = normalize_host(parts.hostname)
        if host is None:
            raise ValueError(f"forum_url has an invalid host: {base!r}")
        port = parts.port or _DEFAULT_PORTS[scheme]
        return cls(base=base, scheme=scheme, host=host, port=port, prefix=parts.path.rstrip("/"))

    def topic_url(self, slug: str, topic_id: int) -> str:
        """``{base}/t/{slug}/{topic_id}``."""
        return f"{self.base}/t/{slug}/{topic_id}"


@dataclass(frozen=True, slots=True, order=True)
class ForumTarget:
    """A topic (``post_number`` None) or a post of the forum that a link points to."""

    topic_id: int
    post_number: int | None = None


_DIGITS = re.compile(r"[0-9]{1,12}")


def _path_target(path: str) -> ForumTarget | None:
    segments = path.rstrip("/").split("/")
    if any(s in {"", ".", ".."} for s in segments):
        return None
    digits = [bool(_DIGITS.fullmatch(s)) for s in segments]
    if len(segments) == 1 and digits[0]:  # /t/123
        return ForumTarget(int(segments[0]))
    if len(segments) == 2 and digits[0] and digits[1]:  # /t/123/4
        return ForumTarget(int(segments[0]), int(segments[1]))
    if len(segments) == 2 and digits[1]:  # /t/slug/123
        return ForumTarget(int(segments[1]))
    if len(segments) == 3 and digits[1] and digits[2]:  # /t/slug/123/4
        return ForumTarget(int(segments[1]), int(segments[2]))
    return None


def resolve_forum_target(destination: str, site: ForumSite) -> ForumTarget | None:
    """The forum topic or post a link destination leads to, or None if it leads elsewhere.

    Only ``/t/...`` paths count, relative (under the forum's sub-folder) or on exactly the forum
    host and port; anything with whitespace, a backslash, credentials, an unknown scheme or a
    host that only looks like the forum's is foreign.
    """
    dest = strip_invisible(html.unescape(destination)).strip(" \t\n")
    dest = unicodedata.normalize("NFKC", dest)
    if not dest or "\\" in dest or any(c.isspace() for c in dest) or len(dest) > 2048:
        return None
    try:
        parts = urlsplit(dest)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme and (scheme not in _DEFAULT_PORTS or not parts.netloc):
        return None
    if parts.netloc:
        if site.host is None or "@" in parts.netloc or parts.hostname is None:
            return None
        if normalize_host(parts.hostname) != site.host:
            return None
        if (port or _DEFAULT_PORTS[scheme or site.scheme or "https"]) != site.port:
            return None
    elif not dest.startswith("/"):
        return None
    path = unicodedata.normalize("NFKC", unquote(parts.path))
    if "\\" in path or any(c.isspace() for c in path):
        return None
    root = f"{site.prefix}/t/"
    if not path.startswith(root):
        return None
    return _path_target(path[len(root):])


def _linkifier(tlds: Iterable[str]) -> LinkifyIt:
    return LinkifyIt().tlds(list(tlds), False)


_LINKIFY = _linkifier(LINKIFY_TLDS)
_LINK_WORD = re.compile(r"(?<![^ ])[^ .:/@]*[.:/@][^ ]*")  # see _linkify_spans
_VIEW_SPECIAL = re.compile(r"[^\x00-\x7f]|\\")  # what _view reads one character at a time


def _view(text: str, nfkc: bool = True, markdown: bool = True
          ) -> tuple[str, list[int], list[int]]:
    """What a reader sees of ``text``: per-character NFKC + casefold, backslash escapes undone.

    Returns the view and, for every view character, the index where its source starts and the
    index just after its source ends (an escape ``\\[`` is one view character from two source
    characters, so a span of the view never cuts an escape in half).
    """
    out: list[str] = []
    starts: list[int] = []
    ends: list[int] = []
    i, n = 0, len(text)
    while i < n:
        # A run of plain ASCII maps one to one (lower case): in bulk, since a character at a
        # time made this the sanitizer's slowest step (it runs on every text it checks).
        special = _VIEW_SPECIAL.search(text, i)
        stop = n if special is None else special.start()
        if stop > i:
            out.append(text[i:stop].lower())
            starts.extend(range(i, stop))
            ends.extend(range(i + 1, stop + 1))
            i = stop
            continue
        ch = text[i]
        width = 1
        if markdown and ch == "\\" and i + 1 < n and text[i + 1] in ASCII_PUNCT:
            ch, width = text[i + 1], 2  # Markdown shows the escaped character itself
        if ch.isascii():
            mapped = ch.lower()
        elif ord(ch) >= 0xF0000:
            mapped = " "  # the sanitizer's markers end any URL
        elif nfkc:
            mapped = unicodedata.normalize("NFKC", ch).casefold()
        else:
            mapped = ch
        out.append(mapped)
        starts.extend([i] * len(mapped))
        ends.extend([i + width] * len(mapped))
        i += width
    return "".join(out), starts, ends


def _trim(view: str, start: int, end: int) -> int:
    """Drop trailing punctuation and closing brackets that the URL did not open."""
    while end > start:
        last = view[end - 1]
        if last in _TRAILING:
            end -= 1
        elif last in _CLOSERS:
            chunk = view[start:end]
            if chunk.count(last) > chunk.count(_CLOSERS[last]):
                end -= 1
            else:
                break
        else:
            break
    return end


def _linkify_spans(linkifier: LinkifyIt, text: str) -> list[tuple[int, int]]:
    """linkify-it's ``(index, last_index)`` links in ``text``, whose whitespace is all spaces.

    linkify-it's fuzzy-link pattern costs about half a microsecond per character, whatever the
    character, and a reply is mostly words that can be no part of a link: every link it finds
    holds a dot (a host), a colon (a scheme), "//" or "@" (an e-mail), and none holds a space.
    So only the words with one of those are given to it, one space apart, and its indices are
    mapped back.
    """
    words = [(m.start(), m.group()) for m in _LINK_WORD.finditer(text)]
    if not words:
        return []
    compact_starts: list[int] = []
    at = 0
    for _, word in words:
        compact_starts.append(at)
        at += len(word) + 1
    spans: list[tuple[int, int]] = []
    for match in linkifier.match(" ".join(word for _, word in words)) or []:
        k = bisect_right(compact_starts, match.index) - 1
        shift = words[k][0] - compact_starts[k]
        spans.append((match.index + shift, match.last_index + shift))
    return spans


def find_urlish(text: str, linkify: LinkifyIt | None = None, *, markdown: bool = True
                ) -> list[tuple[int, int]]:
    """Sorted, merged ``(start, end)`` spans of ``text`` that a renderer could make a link of.

    With ``markdown`` (Markdown source) backslash escapes are read as the characters they show;
    without (rendered text, code), backslashes are literal.
    """
    view, starts, ends = _view(text, markdown=markdown)
    if not any(mark in view for mark in ".:/@"):
        return []  # no host, scheme or e-mail: nothing below can match (see _linkify_spans)
    spans: list[tuple[int, int]] = []
    # Host-level spans found on the text as written ("／／" is not "//" to a renderer, which may
    # then see a "//host" link right after it), mapped to view indices.
    plain, plain_starts, plain_ends = (
        (view, starts, ends) if text.isascii() else _view(text, nfkc=False, markdown=markdown))
    for pattern in _PATTERNS:
        for m in pattern.finditer(view):
            end = _trim(view, m.start(), m.end())
            if "keep" in pattern.groupindex:
                end = max(end, m.end("keep"))  # "javascript:" alone stays a script scheme
            # trimming must leave a URL ("data:]" trims to "data", which is a word)
            if end > m.start() and pattern.fullmatch(view, m.start(), end):
                spans.append((m.start(), end))
    # linkify-it reads the characters that end a URL for us (a backtick closing a code span, a
    # backslash escape, quotes) and emphasis marks as part of the text around a link, and then
    # may not see the link at all ("evil.com`", "_evil.com_" which renders as an italic link):
    # give it spaces there instead.
    # A second pass blanks every character that cannot be part of a host or an e-mail address,
    # to find hosts that odd neighbours hide from linkify-it (":evil.com", "evil.com|" in a
    # table cell); the first pass gives the full extent of the URLs it sees.
    linkifier = linkify or _LINKIFY
    for blanks in (_LINKIFY_BLANKS, _NOT_HOST):
        for index, last_index in _linkify_spans(linkifier, blanks.sub(" ", view)):
            end = _trim(view, index, last_index)
            if end > index:
                spans.append((index, end))
        if plain != view:
            index_of = {start: k for k, start in enumerate(starts)}
            end_of = {end: k + 1 for k, end in enumerate(ends)}
            for index, last_index in _linkify_spans(linkifier, blanks.sub(" ", plain.lower())):
                start = index_of.get(plain_starts[index])
                stop = end_of.get(plain_ends[last_index - 1])
                if start is not None and stop is not None and stop > start:
                    spans.append((start, stop))
    spans.sort()
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return [(starts[s], ends[e - 1]) for s, e in merged]
