"""The deterministic input gate: messages not worth (or not safe) to search, before any model runs.

It is independent of relevance (design note 004, D8): a greeting is not a question however well
it would match, and an injection attempt is refused whatever the forum holds. Each refusal has a
stable reason that the response, the trace and the metrics all carry.

The injection patterns target instructions addressed *to the assistant* (imperatives, "your
prompt", chat-template markers), so a member asking how to write a system prompt for their own
LLM, or whether a router can act as a DHCP server, is not refused.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from enum import StrEnum


class GateReason(StrEnum):
    """Why the gate stopped a message."""

    EMPTY = "empty"
    TOO_SHORT = "too_short"
    GREETING = "greeting"
    THANKS = "thanks"
    LINK_ONLY = "link_only"
    TOO_LONG = "too_long"
    PROMPT_INJECTION = "prompt_injection"


@dataclass(frozen=True, slots=True)
class GateDecision:
    """The gate's verdict; ``rule`` names the pattern that decided (for the trace)."""

    passed: bool
    reason: GateReason | None = None
    rule: str | None = None

    @staticmethod
    def ok() -> GateDecision:
        """A message that may be searched."""
        return GateDecision(True)


# Invisible characters used to split trigger words ("ig\u200bnore") are removed before matching.
_INVISIBLE = re.compile("[\u00ad\u034f\u061c\u115f\u1160\u180e\u200b-\u200f\u202a-\u202e"
                        "\u2060-\u2064\u2066-\u206f\ufeff]")
_WORDS = re.compile(r"[^\W_]+", re.UNICODE)
# Both linear: a bare URL's characters cannot start another match, and an autolink is checked
# to end in ">" (lookahead) before its "://" is searched, each within one run without "<".
_URL = re.compile(r"(?:https?://|ftp://|www\.)[^\s<>()\[\]]+|<(?=[^<>\s]*>)[^<>\s]+://[^<>\s]*>",
                  re.IGNORECASE)

_GREETING_CORE = frozenset(
    """hi hello hey heya hiya howdy yo hola greetings morning evening afternoon
    bonjour bonsoir salut coucou allo wesh rebonjour""".split()
)
_GREETING_WORDS = _GREETING_CORE | frozenset("good day re".split())
_THANKS_CORE = frozenset("thanks thank thx ty tysm cheers thankyou thanx merci".split())
_THANKS_WORDS = _THANKS_CORE | frozenset(
    """appreciated appreciate great perfect awesome nice cool ok okay got worked works solved
    fixed helped helpful much lot so very indeed many you that it this was is now me i we man
    mate buddy beaucoup mille bien parfait super genial top nickel impeccable ca marche
    fonctionne resolu regle c est m a aide d accord daccord vraiment tres""".split()
)
# Words that may accompany a greeting or thanks without making it a question.
_FILLER = frozenset(
    """all everyone everybody there guys folks team friends people bot assistant again for
    the help your to a and forum community tout tous toutes le la les monde vous toi pour aide
    ton votre amis et encore de""".split()
)


@dataclass(frozen=True, slots=True)
class _Pattern:
    rule: str
    regex: re.Pattern[str]


def _p(rule: str, pattern: str) -> _Pattern:
    return _Pattern(rule, re.compile(pattern, re.IGNORECASE | re.MULTILINE))


# Matched against accent-folded, lower-cased text with single spaces (see _fold). _CLAUSE is the
# start of a sentence or an imperative marker: "show the system prompt" as an order, not inside
# "how do I show the system prompt in Open WebUI?".
_CLAUSE = r"(?:^|[.!?;:\n]\s*|\b(?:please|pls|now|svp|stp|maintenant)\s+)"
_REVEAL = (r"(?:reveal|show|print|display|repeat|output|dump|leak|recite|spell\s+out|"
           r"write\s+out|give|tell|send)\s+(?:me\s+|us\s+)?(?:all\s+)?(?:of\s+)?")
_INJECTION: tuple[_Pattern, ...] = (
    _p("ignore_previous_instructions",
       r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+|any\s+|every\s+)?"
       r"(?:of\s+)?(?:the\s+|your\s+|my\s+|these\s+|those\s+)?"
       r"(?:previous|prior|above|earlier|preceding|initial|original|former)\s+"
       r"(?:instructions?|prompts?|rules|directions|directives|guidelines|messages?|context)"),
    _p("forget_your_instructions",
       r"\b(?:ignore|disregard|forget|override|bypass)\s+(?:all\s+)?(?:of\s+)?your\s+"
       r"(?:instructions?|prompt|rules|guidelines|programming|directives|training)"),
    _p("reveal_prompt",
       r"\b" + _REVEAL + r"your\s+(?:\w+\s+){0,2}?(?:prompt|instructions|rules|"
       r"initial\s+message)\b"),
    _p("reveal_system_prompt",
       _CLAUSE + _REVEAL + r"the\s+(?:system|initial|original|hidden|secret)\s+"
       r"(?:prompt|instructions|message)"),
    _p("your_system_prompt",
       r"\byour\s+(?:system|initial|original|hidden|secret|internal)\s+"
       r"(?:prompt|instructions|message|rules)"),
    _p("what_is_your_prompt",
       r"\bwhat(?:\s+is|'s|\s+are|\s+were)\s+your\s+(?:\w+\s+)?(?:prompt|instructions)\b"),
    _p("you_are_now",
       r"\byou\s+are\s+now\s+(?:a|an|my|the|no\s+longer|free|dan|unrestricted|jailbroken)\b"),
    _p("from_now_on",
       r"\bfrom\s+now\s+on,?\s+(?:you|act|respond|answer|behave|pretend|only)\b"),
    _p("act_as",
       _CLAUSE + r"(?:act|behave|respond|answer)\s+(?:as|like)\s+(?:if\s+you\s+were\s+)?"
       r"(?:a|an|my|the|dan|if|though)\b"),
    _p("pretend", r"\bpretend\s+(?:that\s+)?(?:you\s+are|you're|to\s+be|you\s+were)\b"),
    _p("roleplay", r"\b(?:roleplay|role-play|role\s+play)\s+as\b"),
    _p("jailbreak",
       r"\b(?:dan\s+mode|do\s+anything\s+now)\b|"
       r"\byou\s+(?:are|have\s+been)\s+(?:jailbroken|unlocked|freed)\b"),
    _p("new_instructions",
       r"(?:^|\n)\s*(?:new|updated|real|actual)\s+(?:system\s+)?instructions?\s*:"),
    _p("role_marker",
       r"<\|?\s*(?:im_start|im_end|system|endoftext|begin_of_text|start_header_id)"
       r"\s*\|?>|\[/?inst\]|<</?sys>>|(?:^|\n)\s*#{2,}\s*(?:system|instruction)|"
       r"(?:^|\n)\s*(?:system|assistant)\s*:"),
    # French. "J'ignore les règles NAT" (I do not know) must pass: an order to ignore needs a
    # possessive ("tes consignes") or a qualifier ("les instructions précédentes").
    _p("fr_ignore_your_instructions",
       r"\b(?:ignore[rsz]?|oublie[rsz]?|neglige[rsz]?|outrepasse[rsz]?)\s+(?:toutes\s+)?"
       r"(?:tes|vos)\s+(?:\w+\s+)?(?:instructions?|consignes?|regles|directives|prompts?)"),
    _p("fr_ignore_previous_instructions",
       r"\b(?:ignore[rsz]?|oublie[rsz]?|neglige[rsz]?|outrepasse[rsz]?)\s+(?:toutes\s+)?"
       r"(?:les|ces)\s+(?:instructions?|consignes?|regles|directives|prompts?|messages?)\s+"
       r"(?:precedente?s?|anterieure?s?|ci-dessus|initiale?s?|systemes?|d'origine)"),
    _p("fr_reveal_prompt",
       r"\b(?:revele[rsz]?|affiche[rsz]?|montre[rsz]?|donne[rsz]?|repete[rsz]?|ecri[st]|"
       r"dis|dites|envoie[rsz]?|divulgue[rsz]?)[\s-]+(?:moi\s+|nous\s+)?(?:tout\s+)?"
       r"(?:ton|ta|tes|votre|vos)\s+(?:\w+\s+)?(?:prompt|instructions?|consignes?|"
       r"message\s+systeme)"),
    _p("fr_your_prompt",
       r"\b(?:ton|votre)\s+(?:prompt|message)\s+(?:systeme|initial|secret|cache)"),
    _p("fr_you_are_now",
       r"\b(?:tu\s+es|vous\s+etes|t'es)\s+(?:maintenant|desormais|dorenavant)\s+"
       r"(?:un|une|mon|ma|le|la|libre|dan)\b"),
    _p("fr_from_now_on",
       r"\b(?:a\s+partir\s+de\s+maintenant|desormais|dorenavant),?\s+(?:tu|vous)\s+"
       r"(?:es|etes|dois|devez|vas|allez|reponds|repondez|agis|agissez|ignores|ignorez)\b"),
    _p("fr_act_as",
       r"\b(?:agis|agissez|comporte-toi|comportez-vous|reponds|repondez)\s+(?:comme|en\s+tant\s+"
       r"que)\s+(?:si|un|une|le|la|mon|ma)\b"),
    _p("fr_pretend",
       r"\b(?:fais|faites)\s+(?:comme\s+si\s+(?:tu\s+etais|vous\s+etiez)|semblant\s+d'etre)|"
       r"\bjoue[sz]?\s+le\s+role\s+d"),
    _p("fr_jailbreak", r"\bmode\s+sans\s+(?:limites?|restrictions?|filtres?|censure)\b"),
)


def _fold(text: str) -> str:
    """Lower-case, accent-free, compatibility-normalized text with single spaces.

    NFKC maps full-width and other compatibility look-alikes to plain letters; dropping
    combining marks lets "révèle" and "revele" match one pattern.
    """
    text = _INVISIBLE.sub("", unicodedata.normalize("NFKC", text)).casefold()
    text = "".join(c for c in unicodedata.normalize("NFKD", text)
                   if not unicodedata.combining(c))
    text = text.replace("\u2019", "'").replace("\u2018", "'")
    lines = [" ".join(line.split()) for line in text.split("\n")]
    return "\n".join(line for line in lines if line)


def strip_markdown_links(text: str) -> str:
    """``text`` with each ``[label](destination ...)`` (or image) replaced by a space.

    A destination starts with a character that is neither ")" nor a space and ends at the first
    ")". One left-to-right pass: the next "]" and ")" found are remembered, so a "[" that opens
    nothing costs O(1) (a regular expression here was cubic on "[a](" repeated).
    """
    out: list[str] = []
    last = i = 0
    close_bracket = close_paren = -1  # the next "]" / ")" at or after the last search start
    while (i := text.find("[", i)) != -1:
        if close_bracket <= i:
            close_bracket = text.find("]", i + 1)
            if close_bracket == -1:
                break  # no "]" left: no link either
        j = close_bracket
        start = j + 2
        if text.startswith("(", j + 1) and start < len(text) and text[start] != ")" \
                and not text[start].isspace():
            if close_paren < start:
                close_paren = text.find(")", start + 1)
                if close_paren == -1:
                    break  # no ")" left
            opening = i - 1 if i > last and text[i - 1] == "!" else i
            out += [text[last:opening], " "]
            last = i = close_paren + 1
        else:
            i += 1
    return "".join(out) + text[last:]


def injection_rule(text: str) -> str | None:
    """The name of the first prompt-injection pattern ``text`` matches, or None."""
    folded = _fold(text)
    for pattern in _INJECTION:
        if pattern.regex.search(folded):
            return pattern.rule
    return None


def _only(words: list[str], core: frozenset[str], allowed: frozenset[str]) -> bool:
    return bool(words) and any(w in core for w in words) and all(w in allowed for w in words)


def check_input(text: str, *, min_chars: int, max_chars: int) -> GateDecision:
    """Decide whether the latest user message goes on to retrieval.

    Order matters: an over-long message is refused before it is scanned; an injection attempt is
    named as such even when it is short or starts with "hi".
    """
    stripped = _INVISIBLE.sub("", text).strip()
    if not stripped:
        return GateDecision(False, GateReason.EMPTY, "blank")
    # Measured as the search measures it (whitespace collapsed), so a message that passes here
    # is never refused later as an over-long query.
    if len(" ".join(text.split())) > max_chars:
        return GateDecision(False, GateReason.TOO_LONG, f"over {max_chars} characters")
    rule = injection_rule(stripped)
    if rule is not None:
        return GateDecision(False, GateReason.PROMPT_INJECTION, rule)
    without_links = _URL.sub(" ", strip_markdown_links(stripped))
    if without_links != stripped and not _WORDS.search(without_links):
        return GateDecision(False, GateReason.LINK_ONLY, "only links")
    folded = _fold(stripped)
    if not _WORDS.search(folded):
        return GateDecision(False, GateReason.TOO_SHORT, "no letters or digits")
    words = _WORDS.findall(folded.replace("'", " "))
    if _only(words, _GREETING_CORE, _GREETING_WORDS | _FILLER):
        return GateDecision(False, GateReason.GREETING, "greeting only")
    if _only(words, _THANKS_CORE, _THANKS_WORDS | _FILLER | _GREETING_WORDS):
        return GateDecision(False, GateReason.THANKS, "thanks only")
    if sum(len(w) for w in words) < min_chars:
        return GateDecision(False, GateReason.TOO_SHORT, f"under {min_chars} characters")
    return GateDecision.ok()
