"""The forum's own reranker as the search profile records it (``sidecar train-reranker``).

Promoting a reranker writes its entry into the profile, which every API node reads at start-up:
the model directory to load (its manifest says how it was trained and which cosine it corrects)
and what it scored held out when it was promoted. The entry it replaced is kept as
``previous``, so ``sidecar reranker rollback`` can put it back. A reranker named by the settings
(``SIDECAR_RERANK_MODEL`` / ``SIDECAR_RERANK_URL``) is served instead of the profile's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sidecar.config.settings import Settings


class RerankerEntry(BaseModel):
    """A promoted reranker: where it is, what it corrects, how it was made and measured."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="The model's name (its manifest's), part of its scorer id.")
    path: str = Field(description="Its model directory; relative: under the models folder.")
    promoted_at: str
    training: dict[str, Any] = Field(default_factory=dict)
    held_out: dict[str, Any] = Field(default_factory=dict)
    previous: dict[str, Any] | None = Field(
        default=None, description="The entry it replaced (none: the bi-encoder was served).")

    def directory(self, settings: Settings) -> Path:
        """Its model directory on this node."""
        path = Path(self.path)
        return path if path.is_absolute() else settings.models_dir / path

    def scorer(self) -> str:
        """Its scorer id, as zones and traces name it."""
        return f"cross-encoder:{self.name}"
