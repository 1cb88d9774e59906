"""What the member reads when no LLM text may be shown, in the forum's language (pure).

- the abstain text: the zone is ``abstain`` or the LLM used the refusal clause. It says the
  forum has no answer yet and invites a new topic; it holds no evidence link dressed as an
  answer.
- the failure text: the LLM failed or ran out of time. The member gets the evidence as "posts
  that may answer", written as ``[[n]]`` citations so that the sanitizer links them (re-checked
  like any citation), never half an LLM text.
"""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.core.sanitize import markdown_url
from sidecar.core.sanitize_messages import Locale

_ABSTAIN: dict[Locale, str] = {
    "en": "The forum has no answer to this question yet. Ask it in a new topic so that its "
          "members can help",
    "fr": "Le forum n'a pas encore de réponse à cette question. Posez-la dans un nouveau sujet "
          "pour que ses membres puissent vous aider",
}
_NEW_TOPIC: dict[Locale, str] = {"en": "open a new topic", "fr": "ouvrir un nouveau sujet"}
_FAILED: dict[Locale, str] = {
    "en": "The assistant could not write an answer just now. These forum posts may answer "
          "your question:",
    "fr": "L'assistant n'a pas pu rédiger de réponse pour l'instant. Ces messages du forum "
          "répondent peut-être à votre question :",
}


def abstain_text(locale: Locale, forum_base: str = "") -> str:
    """The fixed abstain text, with a link to the forum's new-topic page."""
    url = markdown_url(f"{forum_base.rstrip('/')}/new-topic")
    return f"{_ABSTAIN[locale]}: [{_NEW_TOPIC[locale]}]({url})."


def failure_reply(locale: Locale, evidence: Sequence[tuple[int, str]]) -> str:
    """The evidence ``(n, title)`` as a list of citations, for the sanitizer to link."""
    items = [f"- {title.strip() or '#'} [[{n}]]" for n, title in evidence]
    return "\n".join([_FAILED[locale], "", *items])
