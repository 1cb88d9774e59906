"""The search profile's file format: pydantic models of what ``sidecar tune``, ``calibrate``,
``tune-links`` and ``train-reranker`` write (read and applied by :mod:`sidecar.search.profile`).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sidecar.core.answerability import CalibrationBasis, ZoneCalibration
from sidecar.core.chain_flags import ChainFlags
from sidecar.core.fusion import DEFAULT_LIFT, Fusion, FusionMethod
from sidecar.core.postchoice import LinkRule
from sidecar.core.searchconfig import SearchConfig
from sidecar.core.types import Mode, TopicScore
from sidecar.search.served_reranker import RerankerEntry

PROFILE_FORMAT: Literal[1] = 1


class FusionModel(BaseModel):
    """JSON form of :class:`Fusion`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    method: FusionMethod = FusionMethod.RRF
    weights: dict[str, float] = Field(default_factory=dict)
    rrf_k: int = Field(default=60, ge=0, le=10_000)
    lift: float = Field(default=DEFAULT_LIFT, ge=0, le=1)

    def to_fusion(self) -> Fusion:
        """The core value."""
        for leg, weight in self.weights.items():
            if weight < 0:
                raise ValueError(f"weight of {leg} must be >= 0")
        return Fusion(self.method, tuple(sorted(self.weights.items())), self.rrf_k, self.lift)

    @classmethod
    def of(cls, fusion: Fusion) -> FusionModel:
        """From the core value."""
        return cls(method=fusion.method, weights=dict(fusion.weights), rrf_k=fusion.rrf_k,
                   lift=fusion.lift)


class ServedModel(BaseModel):
    """JSON form of :class:`SearchConfig`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Mode = Mode.HYBRID
    fusion: FusionModel = Field(default_factory=FusionModel)
    topic_score: TopicScore = TopicScore.BEST
    chain: dict[str, Any] = Field(default_factory=dict,
                                  description="Rerank chain flags (ChainFlags fields; missing: "
                                              "the default, every stage off).")

    def to_config(self) -> SearchConfig:
        """The core value (ValueError when a chain parameter is unknown or out of range)."""
        unknown = set(self.chain) - set(ChainFlags.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown rerank chain parameter(s): {', '.join(sorted(unknown))}")
        return SearchConfig(mode=self.mode, fusion=self.fusion.to_fusion(),
                            topic_score=self.topic_score, chain=ChainFlags(**self.chain))

    @classmethod
    def of(cls, config: SearchConfig) -> ServedModel:
        """From the core value (chain parameters only where they differ from the default)."""
        default = ChainFlags().as_dict()
        chain = {k: v for k, v in config.chain.as_dict().items() if default[k] != v}
        return cls(mode=config.mode, fusion=FusionModel.of(config.fusion),
                   topic_score=config.topic_score, chain=chain)


class ProfileSlot(BaseModel):
    """What is served to one query shape, and how it was chosen."""

    model_config = ConfigDict(extra="forbid")

    served: ServedModel
    tuning: dict[str, Any] = Field(default_factory=dict)


class ZoneCalibrationModel(BaseModel):
    """JSON form of :class:`ZoneCalibration` (``sidecar calibrate``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    abstain: float
    normal: float
    abstain_pct: float = Field(ge=0, le=100)
    normal_pct: float = Field(ge=0, le=100)
    questions: int = Field(ge=1)
    created_at: str
    quantiles: list[float] = Field(default_factory=list)
    basis: CalibrationBasis = "opening_posts"
    asked: int = Field(default=0, ge=0)
    seed: int | None = None
    approved_normal: float | None = None

    def to_calibration(self, scorer: str) -> ZoneCalibration:
        """The core value (ValueError when the thresholds are out of order)."""
        if self.abstain > self.normal:
            raise ValueError(f"zones of {scorer}: abstain above normal")
        return ZoneCalibration(scorer=scorer, abstain=self.abstain, normal=self.normal,
                               abstain_pct=self.abstain_pct, normal_pct=self.normal_pct,
                               questions=self.questions, created_at=self.created_at,
                               quantiles=tuple(self.quantiles), basis=self.basis,
                               asked=self.asked, seed=self.seed,
                               approved_normal=self.approved_normal)

    @classmethod
    def of(cls, cal: ZoneCalibration) -> ZoneCalibrationModel:
        """From the core value."""
        return cls(abstain=cal.abstain, normal=cal.normal, abstain_pct=cal.abstain_pct,
                   normal_pct=cal.normal_pct, questions=cal.questions,
                   created_at=cal.created_at, quantiles=list(cal.quantiles),
                   basis=cal.basis, asked=cal.asked, seed=cal.seed,
                   approved_normal=cal.approved_normal)


class PendingZonesModel(BaseModel):
    """A calibration that moved past its bound: not served until a person approves it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    zones: ZoneCalibrationModel
    problems: list[str] = Field(min_length=1)


class LinkRuleModel(BaseModel):
    """JSON form of :class:`LinkRule` with how it was chosen."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    weights: dict[str, float]
    source: str
    held_out: dict[str, Any] = Field(default_factory=dict)

    def to_rule(self) -> LinkRule:
        """The core value (ValueError on an unknown feature)."""
        return LinkRule.of(self.weights, self.source)


class SearchProfile(BaseModel):
    """The file ``sidecar tune`` and ``sidecar calibrate`` write."""

    model_config = ConfigDict(extra="forbid")

    format: Literal[1] = PROFILE_FORMAT
    created_at: str = Field(default_factory=lambda: datetime.now(UTC).isoformat(
        timespec="seconds"))
    model: str = Field(description="Embedding model the profile was tuned with.")
    strategy: int = 1
    served: ServedModel
    tuning: dict[str, Any] = Field(default_factory=dict,
                                   description="How it was chosen: judgements, folds, "
                                               "held-out scores with CIs.")
    with_details: ProfileSlot | None = Field(
        default=None, description="Served to queries that come with details (tuned on "
                                  "judged queries of that shape); absent: `served`.")
    link_rule: LinkRuleModel | None = Field(
        default=None, description="The linked post's rule learned by `sidecar tune-links` "
                                  "(absent: the fixed rule).")
    zones: dict[str, ZoneCalibrationModel] = Field(
        default_factory=dict, description="Zone thresholds per scorer (e.g. "
        "'bi-encoder:all-minilm-l6-v2'), calibrated on the forum's own questions by "
        "`sidecar calibrate`; a scorer not named keeps the settings' thresholds.")
    pending: dict[str, PendingZonesModel] = Field(
        default_factory=dict, description="Calibrations that moved past their bound, per "
        "scorer: never served; `sidecar calibrate --approve` serves them.")
    reranker: RerankerEntry | None = Field(
        default=None, description="The forum's own reranker, promoted by `sidecar "
                                  "train-reranker` (absent: none, or the settings' one).")

    @property
    def tuned(self) -> bool:
        """Whether ``sidecar tune`` chose a served search (not only zones calibrated)."""
        untuned = set(self.tuning) == {"note"}  # what with_zones/with_link_rule write
        return not untuned or self.with_details is not None

    def with_slot(self, slot: ProfileSlot, *, details: bool) -> SearchProfile:
        """This profile with one shape's slot replaced (the other kept)."""
        if details:
            return self.model_copy(update={"with_details": slot})
        return self.model_copy(update={"served": slot.served, "tuning": slot.tuning})
