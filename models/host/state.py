"""What the model host's routes share: the engines, the limits and the metrics.

Its own module, below both route modules (``models.host.app`` builds it, and
``models.host.openai_routes`` reads it), so that neither imports the other for its type.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.host.config import HostConfig
from models.host.engines import EmbedEngine, RerankEngine
from models.host.errors import HostError
from models.host.metrics import HostMetrics
from models.host.tokens import CharBudget


@dataclass
class HostState:
    """What the routes share: the engines, the limits and the metrics."""

    config: HostConfig
    metrics: HostMetrics
    embed: EmbedEngine | None
    rerank: RerankEngine | None
    tokenize_budget: CharBudget

    def require_embed(self) -> EmbedEngine:
        if self.embed is None:
            raise HostError(424, "backend", "this host serves no embedding model")
        return self.embed

    def require_rerank(self) -> RerankEngine:
        if self.rerank is None:
            raise HostError(424, "backend", "model is not a re-ranker model")
        return self.rerank

    def close(self) -> None:
        """Stop the batchers' worker threads."""
        for engine in (self.embed, self.rerank):
            if engine is not None:
                engine.batcher.close()
