"""The citation sanitizer: an LLM answer in, Markdown that only links to public forum posts out.

Pure (no I/O). The adapter (``sidecar.answer.sanitize_service``) loads the retrieval's evidence
and re-checks, at that moment, which of its posts are still public; this module then

1. rewrites ``[[n]]`` and ``[[1, 3]]`` into Markdown links to the cited posts (numbers that are
   not in the evidence, or whose post is no longer public, are dropped and reported);
2. keeps a Markdown link only when it leads to a post or topic of that evidence that is still
   public (rewritten to its canonical URL); every other link, image, autolink, reference
   definition, bare URL and raw HTML tag is removed, link text kept as plain text;
3. escapes what is left so that nothing in it can become a link or a tag again (the output is
   built by allowlist: the only live Markdown links are the ones this module writes);
4. appends the Sources footer and a call to action in the forum's language;
5. renders the result with markdown-it (CommonMark, raw HTML and linkify on, every URL scheme
   accepted) and checks that every link is one it wrote; if not, it starts again in a stricter
   mode that keeps no code spans, and if even that fails the body is replaced by a notice.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Literal
from urllib.parse import quote

from sidecar.core.forum_links import (
    ForumSite,
    ForumTarget,
    find_urlish,
    resolve_forum_target,
    strip_invisible,
)
from sidecar.core.markdown_scan import Scanner, ScanOptions
from sidecar.core.markdown_verify import unexpected_links
from sidecar.core.sanitize_messages import MESSAGES, Locale

MAX_TEXT_CHARS = 50_000
MAX_REMOVALS = 500  # reported individually; beyond that, one summary entry
_STRIP_ROUNDS = 8  # bare-URL passes; the self-check catches anything a last round would find

RemovalKind = Literal["citation", "link", "html"]


@dataclass(frozen=True, slots=True)
class LinkedPost:
    """A post an answer may link to, with its current (re-checked) title and URLs."""

    post_id: int
    topic_id: int
    post_number: int
    title: str
    url: str
    topic_url: str


@dataclass(frozen=True, slots=True)
class EvidenceRef:
    """Evidence item ``n`` of a retrieval: its post and neighbouring posts."""

    n: int
    post: LinkedPost
    neighbours: tuple[LinkedPost, ...] = ()


@dataclass(frozen=True, slots=True)
class Citation:
    """A citation kept in the answer."""

    n: int
    post_id: int
    topic_id: int
    url: str
    title: str


@dataclass(frozen=True, slots=True)
class Removal:
    """Something taken out of the answer, and why."""

    kind: RemovalKind
    value: str
    reason: str


@dataclass
class SanitizeResult:
    """The sanitized Markdown, the citations it keeps and what was removed."""

    text: str
    citations: list[Citation]
    removed: list[Removal]
    strict_mode: bool = False  # the first pass failed its own check and the strict one was used
    allowed_urls: frozenset[str] = field(default_factory=frozenset)


def markdown_url(url: str) -> str:
    """A URL safe inside ``[text](...)``: no spaces, quotes, brackets or parentheses."""
    return quote(url, safe=":/?#@!$&*+,;=%-._~")


class _Links:
    """What the answer may link to: numbered citations and the public posts of the evidence."""

    def __init__(self, evidence: Sequence[EvidenceRef], public: AbstractSet[int]) -> None:
        self.by_n: dict[int, EvidenceRef] = {}
        self.public = public
        self.targets: dict[ForumTarget, tuple[str, str]] = {}  # target → (url, title)
        for ref in evidence:
            self.by_n.setdefault(ref.n, ref)
            for post in (ref.post, *ref.neighbours):
                if post.post_id not in public:
                    continue
                self.targets.setdefault(ForumTarget(post.topic_id, post.post_number),
                                        (markdown_url(post.url), post.title))
                self.targets.setdefault(ForumTarget(post.topic_id),
                                        (markdown_url(post.topic_url), post.title))
        self.non_public = {
            ForumTarget(p.topic_id, p.post_number)
            for ref in evidence for p in (ref.post, *ref.neighbours) if p.post_id not in public
        }

    def cited(self, n: int) -> EvidenceRef | None:
        return self.by_n.get(n)


class _Run:
    """One attempt at sanitizing: collects citations and removals."""

    def __init__(self, links: _Links, site: ForumSite, locale: Locale, strict: bool) -> None:
        self.links = links
        self.site = site
        self.locale = locale
        self.messages = MESSAGES[locale]
        self.removed: list[Removal] = []
        self.cited: dict[int, Citation] = {}
        self.allowed: set[str] = set()
        self.options = ScanOptions(keep_code=not strict,
                                   removed_text=self.messages["link_removed"])

    # -- reporting -----------------------------------------------------------------------------
    def remove(self, kind: RemovalKind, value: str, reason: str) -> None:
        value = value if len(value) <= 200 else value[:199] + "…"
        self.removed.append(Removal(kind, value, reason))

    # -- callbacks of the scanner -------------------------------------------------------------
    def citation(self, numbers: list[int], marker: str) -> list[tuple[str, str]]:
        """Links (text, url) for a ``[[...]]`` marker; dropped numbers are reported."""
        del marker  # each dropped number is reported as its own [[n]]
        out: list[tuple[str, str]] = []
        seen: set[int] = set()
        for n in numbers:
            if n in seen:
                continue
            seen.add(n)
            ref = self.links.cited(n)
            if ref is None:
                known = sorted(self.links.by_n)
                span = f"{known[0]}-{known[-1]}" if known else "none"
                self.remove("citation", f"[[{n}]]",
                            f"citation {n} is not in this retrieval's evidence ({span})")
                continue
            if ref.post.post_id not in self.links.public:
                self.remove("citation", f"[[{n}]]", f"the post cited as {n} is no longer public")
                continue
            url = markdown_url(ref.post.url)
            self.allowed.add(url)
            self.cited.setdefault(n, Citation(n, ref.post.post_id, ref.post.topic_id,
                                              ref.post.url, ref.post.title))
            out.append((str(n), url))
        return out

    def link(self, destination: str, what: str) -> str | None:
        """The canonical URL for a link into the evidence, or None (the link is reported)."""
        target = resolve_forum_target(destination, self.site)
        if target is not None and what == "link":
            found = self.links.targets.get(target)
            if found is not None:
                self.allowed.add(found[0])
                return found[0]
            reason = ("links to a post that is no longer public"
                      if target in self.links.non_public
                      else "links to a forum post that is not in this retrieval's evidence")
        elif target is not None:
            reason = "images are not allowed"
        else:
            reason = _foreign_reason(destination, what, self.site)
        self.remove("link", destination, reason)
        return None

    # -- passes --------------------------------------------------------------------------------
    def strip_urls(self, text: str, nested: bool) -> str:
        """Remove every URL-like span left in text produced by the scanner.

        A bare URL of a public evidence post becomes an autolink to its canonical URL (explicit
        brackets, so no renderer can stretch it), except inside link text (no link in a link).
        Removing one URL can expose another (":evil.com.data:x" shows "evil.com" once
        "data:x" is gone), so the pass repeats until nothing is found.
        """
        for _ in range(_STRIP_ROUNDS):
            spans = find_urlish(text)
            out: list[str] = []
            last = 0
            changed = False
            for start, end in spans:
                while end > start and _escapes_next(text, end):
                    end -= 1  # never split a backslash escape: its character would come alive
                found = text[start:end]
                target = resolve_forum_target(found, self.site)
                known = self.links.targets.get(target) if target is not None else None
                if known is not None and not nested:
                    self.allowed.add(known[0])
                    if text[start - 1:start] == "<" and text[end:end + 1] == ">" \
                            and found == known[0]:
                        continue  # already the autolink an earlier round wrote
                    replacement = f"<{known[0]}>"
                else:
                    reason = ("bare URL outside the forum" if target is None
                              else "bare forum URL not to a public post of this retrieval"
                              if known is None else "URL inside link text")
                    self.remove("link", found, reason)
                    gap = " " if start and not text[start - 1].isspace() else ""
                    replacement = gap + self.messages["link_removed"]
                out += [text[last:start], replacement]
                last = end
                changed = True
            if not changed:
                return text
            text = "".join(out) + text[last:]
        return text

    def body(self, text: str) -> str:
        scanner = Scanner(self.options, citation=self.citation, link=self.link,
                          report=self.remove, finish=self.strip_urls)
        return scanner.render(text).strip()

    def footer(self) -> str:
        lines: list[str] = []
        if self.cited:
            lines += ["---", "", f"**{self.messages['sources']}**", ""]
            options = ScanOptions(keep_code=False, links=False,
                                  removed_text=self.messages["link_removed"])
            scanner = Scanner(options, citation=self.citation,
                              link=self.link, report=self.remove, finish=self.strip_urls)
            for n in sorted(self.cited):
                c = self.cited[n]
                title = scanner.render(c.title).replace("\n", " ").strip() or f"#{c.topic_id}"
                url = markdown_url(c.url)
                self.allowed.add(url)
                lines.append(f"- \\[{n}\\] [{title}]({url})")
            lines.append("")
        lines.append(f"*{self.messages['cta_cited' if self.cited else 'cta_uncited']}*")
        return "\n".join(lines)


def _escapes_next(text: str, end: int) -> bool:
    """True if ``text[:end]`` ends with an odd number of backslashes."""
    count = 0
    while end - count > 0 and text[end - count - 1] == "\\":
        count += 1
    return count % 2 == 1


def _foreign_reason(destination: str, what: str, site: ForumSite) -> str:
    lowered = "".join(destination.split()).lower()
    for scheme in ("javascript:", "vbscript:", "data:", "file:"):
        if scheme in lowered:
            return f"unsafe {scheme} link"
    if what == "image":
        return "images are not allowed"
    if not site.base:
        return "not a relative /t/ link into the forum"
    return "does not point into the forum"


def _finalize(run: _Run, body: str, footer: bool = True) -> str:
    if not footer:
        return body
    end = run.footer()
    return f"{body}\n\n{end}" if body else end


def sanitize_answer(
    text: str,
    evidence: Sequence[EvidenceRef],
    public_post_ids: AbstractSet[int],
    site: ForumSite,
    locale: Locale,
    *,
    footer: bool = True,
) -> SanitizeResult:
    """Sanitize an LLM answer against one retrieval's evidence (see the module docstring).

    ``footer=False`` gives the body alone, without Sources and call to action: the part of a
    streamed answer sent while it grows (:mod:`sidecar.core.stream_sanitize`).
    """
    links = _Links(evidence, public_post_ids)
    clean = strip_invisible(text)
    for strict in (False, True):
        run = _Run(links, site, locale, strict)
        result = _finalize(run, run.body(clean), footer)
        if not unexpected_links(result, run.allowed):
            return _result(run, result, strict)
    # Both passes produced something the renderer would link: show nothing of the answer.
    run = _Run(links, site, locale, True)
    run.remove("html", text[:200], "the answer could not be made safe; it was replaced")
    return _result(run, _finalize(run, run.messages["unsafe"], footer), True)


def _result(run: _Run, text: str, strict: bool) -> SanitizeResult:
    removed = run.removed
    if len(removed) > MAX_REMOVALS:
        extra = len(removed) - MAX_REMOVALS
        removed = [*removed[:MAX_REMOVALS],
                   Removal("link", "…", f"{extra} more removals not listed")]
    return SanitizeResult(text=text, citations=[run.cited[n] for n in sorted(run.cited)],
                          removed=removed, strict_mode=strict,
                          allowed_urls=frozenset(run.allowed))
