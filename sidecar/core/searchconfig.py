"""What one search runs with: the legs, how they are fused, how posts become topics.

The served configuration comes from the settings (``SIDECAR_SEARCH_MODE``, ``SIDECAR_FUSION``,
``SIDECAR_FUSION_WEIGHTS``, ``SIDECAR_RRF_K``, ``SIDECAR_TOPIC_SCORE``, ``SIDECAR_CHAIN_*``)
unless a search profile written by ``sidecar tune`` replaces it; a request may override any part.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from sidecar.core.chain_flags import ChainFlags
from sidecar.core.fusion import Fusion
from sidecar.core.types import Leg, Mode, TopicScore


@dataclass(frozen=True, slots=True)
class SearchConfig:
    """Legs, fusion (used when both legs run), topic score and the rerank chain."""

    mode: Mode = Mode.HYBRID
    fusion: Fusion = field(default_factory=Fusion)
    topic_score: TopicScore = TopicScore.BEST
    chain: ChainFlags = field(default_factory=ChainFlags)

    def override(
        self, *, mode: Mode | None = None, fusion: Fusion | None = None,
        topic_score: TopicScore | None = None, chain: ChainFlags | None = None,
    ) -> SearchConfig:
        """This configuration with the parts a request names replaced."""
        return replace(
            self,
            mode=mode or self.mode,
            fusion=fusion or self.fusion,
            topic_score=topic_score or self.topic_score,
            chain=chain or self.chain,
        )

    def legs(self) -> tuple[Leg, ...]:
        """The legs to run: a hybrid whose fusion gives a leg no weight does not run it."""
        legs = self.mode.legs()
        if len(legs) > 1:
            weighted = tuple(leg for leg in legs if self.fusion.weight(leg.value) > 0)
            return weighted or legs
        return legs

    def describe(self) -> dict[str, Any]:
        """JSON form, as /v1/health and the evaluation's meta show it."""
        legs = self.legs()
        out: dict[str, Any] = {"mode": self.mode.value, "legs": [leg.value for leg in legs],
                               "topic_score": self.topic_score.value}
        if len(legs) > 1:
            out["fusion"] = self.fusion.describe()
        stages = self.chain.stages()
        if stages:
            # The enabled stages with their parameters (mmr_*, boost_*, knee_*).
            prefixes = tuple(f"{stage.removesuffix('s')}_" for stage in stages)
            out["chain"] = {name: value for name, value in self.chain.as_dict().items()
                            if name in stages or name.startswith(prefixes)}
        return out
