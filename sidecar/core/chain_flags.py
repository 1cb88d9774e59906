"""The rerank chain's flags and parameters: a frozen value without numpy (settings import it).

The stages themselves live in :mod:`sidecar.core.chain` (MMR, boosts) and
:mod:`sidecar.core.knee` (the evidence cut-off).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# The chain reorders at most this many topics (the MMR's cost is bounded here); the rest of a
# longer list keeps its fused order after them.
MAX_CANDIDATES = 300


@dataclass(frozen=True)
class ChainFlags:
    """Which stages run and their parameters. All off by default: the chain is then a no-op.

    Boost weights multiply signals in [-1, 1] (accepted answer, likes, recency, category
    priority, closed/archived); their weighted sum is clipped to [-1, 1] and moves a topic at
    most ``boost_positions`` ranks past topics scored differently (and past any topic scored the
    same). A weight of 0 switches that signal off.
    """

    mmr: bool = False
    mmr_lambda: float = 0.7  # 1 = relevance only (no change), 0 = diversity only
    mmr_depth: int = 50  # places chosen by MMR; the rest keep their order
    mmr_pool: int = 100  # the first topics MMR chooses among (their vectors are loaded)
    mmr_query_residual: bool = False  # redundancy measured after removing the query direction
    boosts: bool = False
    boost_positions: float = 1.5
    boost_accepted: float = 1.0
    boost_likes: float = 0.5
    boost_likes_saturation: int = 20  # likes at which the likes signal reaches 1 (log-damped)
    boost_recency: float = 0.0
    boost_half_life_days: float = 365.0
    boost_category: float = 1.0
    boost_closed: float = 0.25
    knee: bool = False
    knee_min_items: int = 2
    knee_sensitivity: float = 0.3

    def __post_init__(self) -> None:
        checks = {
            "mmr_lambda": 0.0 <= self.mmr_lambda <= 1.0,
            "mmr_depth": 1 <= self.mmr_depth <= self.mmr_pool,
            "mmr_pool": 1 <= self.mmr_pool <= MAX_CANDIDATES,
            "boost_positions": 0.0 <= self.boost_positions <= 50.0,
            "boost_likes_saturation": self.boost_likes_saturation >= 1,
            "boost_half_life_days": self.boost_half_life_days > 0.0,
            "knee_min_items": self.knee_min_items >= 1,
            "knee_sensitivity": 0.0 <= self.knee_sensitivity <= 1.0,
        }
        for name in ("boost_accepted", "boost_likes", "boost_recency", "boost_category",
                     "boost_closed"):
            checks[name] = 0.0 <= getattr(self, name) <= 10.0
        bad = [name for name, ok in checks.items() if not ok]
        if bad:
            raise ValueError(f"invalid rerank chain parameter(s): {', '.join(bad)}")

    @property
    def reorders(self) -> bool:
        """True when a topic stage (MMR or boosts) is on."""
        return self.mmr or self.boosts

    def stages(self) -> list[str]:
        """The enabled stages, in the order they run."""
        return [name for name, on in (("mmr", self.mmr), ("boosts", self.boosts),
                                      ("knee", self.knee)) if on]

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return asdict(self)
