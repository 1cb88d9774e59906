"""An independent audit of sanitized answers: every URL-ish thing must be an allowed forum link.

Written separately from the sanitizer (no shared code but markdown-it, the renderer a forum uses)
so that a blind spot of one is not the blind spot of the other. It looks three ways:

1. the Markdown, NFKC-normalised and casefolded, with broad regular expressions for schemes,
   ``//host``, ``www.``, ``host.tld`` and script-ish schemes — after taking out the allowed URLs,
   nothing may match;
2. the HTML that markdown-it renders (raw HTML and linkify on, every scheme accepted): only
   harmless tags, no attribute but ``href`` on ``<a>`` (and a code block's language class), and
   every ``href`` allowed;
3. the text of that HTML, once more through (1);
4. the tokens Discourse's own markdown-it would produce, through a port of its "text
   post-process" rules (discourse-markdown-it: features/mentions.js, hashtag-autocomplete.js,
   text-post-process.js): no ``@mention`` or ``#hashtag`` may come alive.
"""

from __future__ import annotations

import re
import unicodedata
from html.parser import HTMLParser

from markdown_it import MarkdownIt
from markdown_it.common.utils import isPunctChar, isWhiteSpace

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


# As Discourse builds its engine (markdown-it's default preset, raw HTML, line breaks, linkify,
# typographer); markdown-it >= 13 joins escapes and entities back into the text tokens.
_DISCOURSE = MarkdownIt("default", {"html": True, "breaks": True, "linkify": True,
                                    "typographer": True})
# ... linkifying the same TLDs as the forum (above): with every TLD, "README.md@a" became a link
# followed by a text token "@a", a mention Discourse never sees (hypothesis found it).
assert _DISCOURSE.linkify is not None
_DISCOURSE.linkify.tlds(_TLDS.split("|"), False)
# The hashtag rule as Discourse writes it (JavaScript's \w is ASCII).
_HASHTAG = re.compile(r"#([\u00C0-\u1FFF\u2C00-\uD7FF0-9A-Za-z_:-]{1,101})")


def _name_char(ch: str) -> bool:
    # unicode_usernames: \p{Alphabetic}, \p{Mark}, \p{Decimal_Number} (a superset of ASCII \w
    # without "_", which the rule adds separately)
    return ch.isalnum() or unicodedata.category(ch).startswith("M")


def _mention_end(text: str, at: int) -> int | None:
    """End of the mention matched at ``text[at] == "@"``, or None.

    ``@([alnum_][alnum._-]{0,58}[alnum])|@([alnum_])``: the longest name of at most 60
    characters that ends in a letter or digit, else one character.
    """
    i = at + 1
    if i >= len(text) or not (_name_char(text[i]) or text[i] == "_"):
        return None
    end = i + 1
    j = i + 1
    while j < len(text) and j - i < 60 and (_name_char(text[j]) or text[j] in "._-"):
        j += 1
        if _name_char(text[j - 1]):
            end = j
    return end


def _boundary(ch: str) -> bool:
    return isWhiteSpace(ord(ch)) or isPunctChar(ch)


def live_mentions(text: str) -> list[str]:
    """The mentions and hashtags Discourse would render in one text token's content."""
    found = []
    pos = 0
    while pos < len(text):
        at = min((i for i in (text.find("@", pos), text.find("#", pos)) if i != -1), default=-1)
        if at == -1:
            break
        if text[at] == "@":
            end = _mention_end(text, at)
        else:
            m = _HASHTAG.match(text, at)
            end = m.end() if m else None
        if end is None:
            pos = at + 1
            continue
        if (at == 0 or _boundary(text[at - 1])) and (end == len(text) or _boundary(text[end])):
            found.append(text[at:end])
        pos = end
    return found


def discourse_mentions(markdown: str) -> list[str]:
    """Every live mention and hashtag of ``markdown`` cooked as Discourse cooks it."""
    found = []
    for block in _DISCOURSE.parse(markdown):
        depth = 0  # text inside a link is never scanned
        for token in block.children or []:
            if token.type == "link_open" or (token.type == "html_inline"
                                              and re.match(r"<a[\s>]", token.content, re.I)):
                depth += 1
            elif token.type == "link_close" or (token.type == "html_inline"
                                                and token.content.lower().startswith("</a")):
                depth = max(0, depth - 1)
            elif token.type == "text" and depth == 0:
                found += live_mentions(token.content)
    return found


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
    problems += [f"discourse: live {m!r}" for m in discourse_mentions(markdown)]
    return problems
