"""The configurations `sidecar tune` chooses from, simplest first.

Single legs come first so that, on a tie, the tuner prefers not fusing at all; then unweighted
RRF (today's default), weighted RRF, score fusion (z-score, min-max) with convex weights, each
with each topic score; last, the default fusion with the rerank chain's stages.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sidecar.core.chain_flags import ChainFlags
from sidecar.core.fusion import Fusion, FusionMethod
from sidecar.core.searchconfig import SearchConfig
from sidecar.core.types import Leg, Mode, TopicScore

SEMANTIC_WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
RRF_KS = (10, 30, 60, 100)


@dataclass(frozen=True)
class Candidate:
    """A configuration with a short, stable name for reports."""

    name: str
    config: SearchConfig


def _weights(w_semantic: float) -> dict[str, float]:
    return {Leg.SEMANTIC.value: w_semantic, Leg.KEYWORD.value: round(1.0 - w_semantic, 6)}


def single_legs(topic_score: TopicScore = TopicScore.BEST) -> list[Candidate]:
    """Semantic alone and keyword alone."""
    suffix = "" if topic_score is TopicScore.BEST else f"-{topic_score.value}"
    return [Candidate(f"semantic{suffix}", SearchConfig(Mode.SEMANTIC, topic_score=topic_score)),
            Candidate(f"keyword{suffix}", SearchConfig(Mode.KEYWORD, topic_score=topic_score))]


# The rerank chain's stages tried on top of the default fusion (one factor at a time, then
# both): MMR with the lambda that cost least on the eval forum, and the metadata boosts.
CHAIN_VARIANTS: tuple[tuple[str, ChainFlags], ...] = (
    ("boosts", ChainFlags(boosts=True)),
    ("mmr85", ChainFlags(mmr=True, mmr_lambda=0.85)),
    ("boosts-mmr85", ChainFlags(boosts=True, mmr=True, mmr_lambda=0.85)),
)


def candidates(*, hybrid: bool = True) -> list[Candidate]:
    """The whole space (single legs only when ``hybrid`` is False, e.g. keyword-only forums)."""
    out: list[Candidate] = []
    for ts in TopicScore:
        out += single_legs(ts)
    if not hybrid:
        return out

    for ts in TopicScore:
        suffix = "" if ts is TopicScore.BEST else f"-{ts.value}"
        for k in RRF_KS:
            out.append(Candidate(f"rrf-k{k}{suffix}",
                                 SearchConfig(Mode.HYBRID, Fusion(FusionMethod.RRF, (), k), ts)))
        for k in RRF_KS:
            for w in SEMANTIC_WEIGHTS:
                if w == 0.5:
                    continue  # equal weights: the unweighted RRF above
                fusion = Fusion(FusionMethod.RRF, (), k).with_weights(_weights(w))
                out.append(Candidate(f"rrf-k{k}-s{w:g}{suffix}",
                                     SearchConfig(Mode.HYBRID, fusion, ts)))
        for method in (FusionMethod.ZSCORE, FusionMethod.MINMAX):
            for w in SEMANTIC_WEIGHTS:
                fusion = Fusion(method).with_weights(_weights(w))
                out.append(Candidate(f"{method.value}-s{w:g}{suffix}",
                                     SearchConfig(Mode.HYBRID, fusion, ts)))
    default = SearchConfig()
    out += [Candidate(f"rrf-k{default.fusion.rrf_k}+{name}", replace(default, chain=flags))
            for name, flags in CHAIN_VARIANTS]
    return out
