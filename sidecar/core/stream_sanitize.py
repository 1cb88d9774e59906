"""A streamed answer, sanitized as it grows (pure, no I/O).

The LLM's reply arrives a few characters at a time; the member may only ever see sanitized text.
So the stream holds back the reply's tail until it ends at a point where nothing is open (a
``[[n]]`` citation, a link's text or destination, a code span, an HTML tag, a word that may be a
URL), sanitizes everything up to that point, and sends what the sanitized text gained since the
last time. What the member has received is therefore always exactly one sanitizer output: every
citation and link in it was checked. When the sanitized text of a longer prefix is not a
continuation of what was sent (Markdown read differently once more text came), the stream sends
nothing more, and the final event's whole answer replaces it.

The start of the reply is held back too while it could still be the refusal sentinel, and a
reasoning model's ``<think>`` block is never sent.
"""

from __future__ import annotations

from collections.abc import Callable

from sidecar.core.answer_prompt import is_refusal, may_become_refusal, strip_thinking

# Characters sanitized again at least this far apart: each pass reads the whole prefix, so a
# step per token would cost the square of the answer's length.
MIN_STEP_CHARS = 24


def safe_cut(text: str) -> int:
    """The end of the longest prefix of ``text`` that stops at whitespace with nothing open.

    Open: a code fence or span, an unclosed ``[`` (a citation or a link's text), a link
    destination ``](…`` or an angle bracket ``<…`` not yet closed. Backslash escapes are skipped.
    """
    best = 0
    brackets = parens = 0
    angle = fence = span = False
    i, n = 0, len(text)
    line_start = True
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            line_start = False
            continue
        if line_start and text.startswith(("```", "~~~"), i):
            fence = not fence
            i += 3
            line_start = False
            continue
        if c == "\n":
            line_start = True
        elif not c.isspace():
            line_start = line_start and c in " \t"
        if fence:
            pass
        elif c == "`":
            span = not span
        elif span:
            pass
        elif c == "[":
            brackets += 1
        elif c == "]":
            brackets = max(0, brackets - 1)
            if text.startswith("(", i + 1):
                parens += 1
                i += 1
        elif c == ")" and parens:
            parens -= 1
        elif c == "<":
            angle = True
        elif c == ">":
            angle = False
        if c.isspace() and not (fence or span or angle or brackets or parens):
            best = i + 1
        i += 1
    return best


class StreamSanitizer:
    """Feed it the reply as it comes; it returns the sanitized text to append each time."""

    def __init__(self, sanitize_body: Callable[[str], str],
                 min_step: int = MIN_STEP_CHARS) -> None:
        """``sanitize_body``: a prefix of the reply → its sanitized body (no footer)."""
        self.sanitize_body = sanitize_body
        self.min_step = min_step
        self.raw = ""
        self.sent = ""  # exactly what the member has received: one sanitizer output
        self.diverged = False  # the sanitized text stopped growing by appending
        self._cut = 0

    def feed(self, chunk: str) -> str:
        """Add ``chunk`` of the reply; the sanitized text to send now ("" to hold back)."""
        self.raw += chunk
        if self.diverged:
            return ""
        text = strip_thinking(self.raw)
        if is_refusal(text):
            self.diverged = True  # the final event gives the abstain text instead
            return ""
        if may_become_refusal(text):
            return ""
        cut = safe_cut(text)
        if cut - self._cut < self.min_step:
            return ""
        self._cut = cut
        body = self.sanitize_body(text[:cut])
        if not body.startswith(self.sent):
            self.diverged = True
            return ""
        delta, self.sent = body[len(self.sent):], body
        return delta
