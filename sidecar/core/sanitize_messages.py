"""What the sanitizer writes in the forum's language: Sources, calls to action, notices."""

from __future__ import annotations

from typing import Literal

Locale = Literal["en", "fr"]

MESSAGES: dict[Locale, dict[str, str]] = {
    "en": {
        "sources": "Sources",
        "cta_cited": "Read the full discussions on the forum: each link above opens the message "
                     "this answer relies on, with its replies.",
        "cta_uncited": "No forum discussion is cited in this answer: ask your question on the "
                       "forum to get answers from its members.",
        "link_removed": "(link removed)",
        "unsafe": "This answer could not be displayed safely.",
    },
    "fr": {
        "sources": "Sources",
        "cta_cited": "Retrouvez les discussions complètes sur le forum : chaque lien ci-dessus "
                     "ouvre le message sur lequel s'appuie cette réponse, avec ses réponses.",
        "cta_uncited": "Aucune discussion du forum n'est citée dans cette réponse : posez votre "
                       "question sur le forum pour obtenir l'avis de ses membres.",
        "link_removed": "(lien supprimé)",
        "unsafe": "Cette réponse n'a pas pu être affichée de façon sûre.",
    },
}


def pick_locale(requested: str | None, default: str) -> Locale:
    """``fr``/``fr-FR``/``fr_CA`` → fr, ``en-*`` → en; anything else falls back to ``default``."""
    for value in (requested, default):
        lang = (value or "").strip().lower().replace("_", "-").split("-")[0]
        if lang == "fr":
            return "fr"
        if lang == "en":
            return "en"
    return "en"
