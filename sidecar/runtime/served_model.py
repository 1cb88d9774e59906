"""The embedding model a process serves: the configured one, or the forum-tuned one promoted.

Read once when a process starts (:func:`sidecar.runtime.resources.start_resources`), before any
model loads: the promoted entry (:mod:`sidecar.db.served_embedder`) replaces the configured model
in the process's settings, so everything downstream (the query embedder, the vectors the
semantic leg reads, the search profile and zones keyed by model, the backfill's default model)
names one model. A promoted model serves only while the configured model is still the one it was
tuned from (an operator who configures another model has chosen it), only in process (a remote
model host serves what it was started with), and only where its folder is on this node;
otherwise the configured model serves, and ``/v1/health`` says why.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from sidecar.config.settings import Settings
from sidecar.db import Database
from sidecar.db.served_embedder import EmbedderEntry, read_served

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServedChoice:
    """Which model serves and why (``/v1/health``'s ``models.embedder.served_by``)."""

    settings: Settings  # the process's settings, with the served model in them
    configured: Settings  # the settings as configured (SIDECAR_EMBED_MODEL's model)
    source: str  # "settings" or "promoted"
    note: str | None = None
    entry: EmbedderEntry | None = None

    def describe(self) -> dict[str, object]:
        """JSON form."""
        out: dict[str, object] = {"source": self.source}
        if self.entry is not None:
            out["promoted"] = {"name": self.entry.name, "base": self.entry.base,
                               "promoted_at": self.entry.promoted_at}
        if self.note:
            out["note"] = self.note
        return out


def with_model(settings: Settings, name: str) -> Settings:
    """``settings`` serving the prepared model ``name`` of the models folder."""
    return settings.model_copy(update={"embed_model": name,
                                       "embed_model_path": settings.models_dir / name,
                                       "embed_source": None})


def served_choice(settings: Settings, db: Database) -> ServedChoice:
    """The settings a process serves with: the promoted embedder's, when it applies here."""
    with db.connection() as conn:
        entry = read_served(conn)
    if entry is None:
        return ServedChoice(settings, settings, "settings")
    why = None
    if settings.embed_url:
        why = (f"a model host serves the embeddings (SIDECAR_EMBED_URL): {entry.name} is served "
               "only in process; start the host with its folder to serve it there")
    elif entry.base != settings.embed_model:
        why = (f"{entry.name} was tuned from {entry.base}, and SIDECAR_EMBED_MODEL now names "
               f"{settings.embed_model}: the configured model serves")
    elif not (settings.models_dir / entry.name / "manifest.json").is_file():
        why = (f"{entry.name} is promoted but its folder is not on this node "
               f"({settings.models_dir / entry.name}): copy it here, then reload")
    if why is not None:
        log.warning("promoted embedder not served: %s", why)
        return ServedChoice(settings, settings, "settings", why, entry)
    return ServedChoice(with_model(settings, entry.name), settings, "promoted", None, entry)


def configured_settings(settings: Settings, served: ServedChoice | None) -> Settings:
    """The settings as configured, before a promoted embedder replaced the model in them (a
    tuned model is trained from, and rolls back to, the configured one)."""
    return served.configured if served is not None else settings
