"""An independent audit of sanitized answers: every URL-ish thing must be an allowed forum link.

Written separately from the sanitizer (no shared code but markdown-it, the renderer a forum uses)
so that a blind spot of one is not the blind spot of the other. It looks three ways:

1. the Markdown, NFKC-normalised and casefolded, with broad regular expressions for schemes,
   ``//host``, ``www.``, ``host.tld`` and script-ish schemes — after taking out the allowed URLs,
   nothing may match;
2. the HTML that markdown-it renders (raw HTML and linkify on, every scheme accepted): only
   harmless tags, no attribute but ``href`` on ``<a>`` (and a code block's language class), and
   every ``href`` allowed;
3. the text of that HTML, once more through (1).
"""

from __future__ import annotations

import re
import unicodedata
from html.parser import HTMLParser

from markdown_it import MarkdownIt

_TLDS = ("com|net|org|io|co|ru|cn|info|biz|xyz|app|dev|example|site|online|me|"
         "de|fr|uk|us|eu|tv|onion|top|shop|link|click|zip|mov|gov|edu")
_URLISH = [
    re.compile(r"[a-z][a-z0-9+.\-]{0,30}://", re.I),  # any scheme://
    re.compile(r"(?<![^\W_])(?:java|vb|live)\s*script\s*:", re.I),
    # a link-making scheme right before something that can continue a URL ("data: the results"
    # is prose, "data:text/html,..." is not)
    re.compile(r"(?<![^\W_]|/)(?:data|file|blob|mailto|about|view-source):(?=[^\W_]|[/%+,;=-])",
               re.I),
    re.compile(r"(?<![\w/:])//[\w\-]+\.[\w\-]+", re.I),
    re.compile(r"(?<![^\W_])www\d*\.[^\W_]", re.I),
    # a host ending in a linkified TLD (and not continuing with more labels: "x.org1")
    re.compile(rf"(?<![\w.\-/@])[\w\-]+(?:\.[\w\-]+)*\.(?:{_TLDS})\b(?![\w\-]|\.[\w\-])",
               re.I),
    # host.tld/path, whatever the TLD
    re.compile(r"(?<![\w.\-/@])[^\W_][\w\-]*(?:\.[\w\-]+)*\.[^\W\d_]{2,}[\w\-]*(?::\d+)?/",
               re.I),
    re.compile(rf"(?<![\w.+\-])[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)*\.(?:{_TLDS})\b"
               rf"(?![\w\-]|\.[\w\-])", re.I),
]
_OK_TAGS = frozenset("p a em strong code pre ul ol li blockquote h1 h2 h3 h4 h5 h6 hr br table "
                     "thead tbody tr th td del s".split())

_MD = MarkdownIt("commonmark", {"html": True, "linkify": True}).enable(
    ["linkify", "table", "strikethrough"])
_MD.validateLink = lambda url: True  # type: ignore[method-assign]
# Linkify with the TLDs a forum linkifies (Discourse's markdown_linkify_tlds policy, documented
# in docs/sanitize.md), not every two-letter code: "README.md" is not a link on a forum.
assert _MD.linkify is not None
_MD.linkify.tlds(_TLDS.split("|"), False)


def _views(text: str) -> list[str]:
    # NFKC and casefolded, as a browser resolving a host would see it. Entities are not decoded
    # here: the rendered text comes decoded (once) from the HTML parser, and in code they show
    # as written.
    return [unicodedata.normalize("NFKC", text).casefold()]


def _scan_text(text: str, allowed: set[str], where: str) -> list[str]:
    problems = []
    for view in _views(text):
        for url in sorted(allowed, key=len, reverse=True):
            view = view.replace(url.casefold(), " ")
        for pattern in _URLISH:
            for m in pattern.finditer(view):
                context = view[max(0, m.start() - 30):m.end() + 30]
                problems.append(f"{where}: URL-ish {m.group(0)!r} in …{context!r}")
    return problems


class _Html(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def handle_comment(self, data: str) -> None:
        self.tags.append(("!--", []))


def audit(markdown: str, allowed: set[str]) -> list[str]:
    """Problems found in a sanitized answer (empty: every link is one of ``allowed``)."""
    problems = _scan_text(markdown, allowed, "markdown")
    normalized = {_MD.normalizeLink(u) for u in allowed} | allowed
    parser = _Html()
    parser.feed(_MD.render(markdown))
    parser.close()
    for tag, attrs in parser.tags:
        if tag not in _OK_TAGS:
            problems.append(f"html: <{tag}> rendered")
        for name, value in attrs:
            if tag == "a" and name == "href":
                if value not in normalized:
                    problems.append(f"html: link to {value!r}")
            elif not (tag == "code" and name == "class"):
                problems.append(f"html: attribute {name}={value!r} on <{tag}>")
    problems += _scan_text(" ".join(parser.text), allowed, "rendered text")
    return problems
