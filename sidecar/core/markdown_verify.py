"""The sanitizer's own check: render the output as the forum would and list unexpected links.

markdown-it is the parser family Discourse cooks posts with. It is configured here to be more
permissive than any forum: raw HTML on, linkify on (with the TLDs a forum linkifies) and every
link destination accepted (markdown-it's default refuses ``javascript:`` links, which would hide
them from this check). Anything that renders as a link to a URL the sanitizer did not write, an
image, or raw HTML, is a problem; so is URL-like text left in a text or code token, and a
mention or hashtag that Discourse would bring alive in a text token outside a link
(``sidecar.core.mentions``: escapes are joined back into text tokens here too, as markdown-it
>= 13 does for Discourse).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from markdown_it import MarkdownIt
from markdown_it.token import Token

from sidecar.core.forum_links import LINKIFY_TLDS, find_urlish
from sidecar.core.mentions import live_mentions

_MD = MarkdownIt("commonmark", {"html": True, "linkify": True}).enable(
    ["linkify", "table", "strikethrough"]
)
assert _MD.linkify is not None  # linkify-it-py is a dependency
_MD.linkify.tlds(list(LINKIFY_TLDS), False)
_MD.validateLink = lambda url: True  # type: ignore[method-assign]


def _walk(tokens: Iterable[Token]) -> Iterator[Token]:
    for token in tokens:
        yield token
        if token.children:
            yield from _walk(token.children)


def unexpected_links(markdown: str, allowed: Iterable[str]) -> list[str]:
    """What in ``markdown`` would link or embed somewhere not in ``allowed`` (empty: safe)."""
    allowed = set(allowed)
    normalized = {_MD.normalizeLink(url) for url in allowed}
    problems: list[str] = []
    tokens = _MD.parse(markdown)
    for block in tokens:
        link_depth = 0  # Discourse never looks for mentions inside a link's text
        for token in block.children or []:
            if token.type in {"link_open", "link_close"}:
                link_depth += token.nesting
            elif token.type == "text" and link_depth == 0:
                problems += [f"live mention or hashtag: {m[:80]!r}"
                             for m in live_mentions(token.content)]
    for token in _walk(tokens):
        if token.type in {"html_block", "html_inline"}:
            problems.append(f"raw HTML: {token.content[:80]!r}")
        elif token.type == "image":
            problems.append(f"image: {token.attrGet('src')!r}")
        elif token.type == "link_open":
            href = str(token.attrGet("href") or "")
            if href not in normalized:
                problems.append(f"link: {href[:120]!r}")
        elif token.type in {"text", "code_inline", "code_block", "fence"}:
            content = token.content
            for url in sorted(allowed, key=len, reverse=True):
                content = content.replace(url, " ")  # e.g. a citation inside indented code
            for start, end in find_urlish(content, markdown=False):
                problems.append(f"URL-like text: {content[start:end][:120]!r}")
    return problems
