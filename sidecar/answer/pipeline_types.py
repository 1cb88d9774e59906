"""What the retrieval pipeline reads and what it decides: its resources, an assessment, an outcome.

The pipeline itself is :mod:`sidecar.answer.pipeline`; these types are shared with the
evaluation and the zone calibration, which run its steps without storing anything.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from redis import Redis

from models.protocols import Reranker
from sidecar.answer.condense import Condensed
from sidecar.answer.rerank import Candidate
from sidecar.config.settings import Settings
from sidecar.core.answer_prompt import Prompt
from sidecar.core.gate import GateDecision
from sidecar.core.rerank_score import Residual
from sidecar.core.trace import Trace
from sidecar.core.zones import ScorerKind, Zone
from sidecar.db import Database
from sidecar.db.embeddings import RegisteredModel
from sidecar.search.profile import ProfileState
from sidecar.search.service import SearchOptions, SearchOutcome, SearchService


class PipelineResources(Protocol):
    """What the pipeline takes of the process's resources.

    ``sidecar.runtime.resources.Resources`` is one: it builds the pipeline
    (``Resources.retrieval``), so the pipeline names what it reads here rather than importing the
    runtime that imports it.
    """

    @property
    def settings(self) -> Settings:
        """The process's settings."""
        ...

    @property
    def db(self) -> Database:
        """The connection pool."""
        ...

    @property
    def redis(self) -> Redis:
        """The Redis client (the condenser's cache and budget)."""
        ...

    @property
    def model(self) -> RegisteredModel:
        """The serving embedding model, as registered."""
        ...

    @property
    def search(self) -> SearchService:
        """The search the pipeline runs wide."""
        ...

    @property
    def profile(self) -> ProfileState:
        """The served search profile (its calibrated zones)."""
        ...

    @property
    def reranker(self) -> Reranker | None:
        """The cross-encoder, if one is configured and loaded."""
        ...

    @property
    def reranker_error(self) -> str | None:
        """Why the configured cross-encoder is not loaded, if it is not."""
        ...

    @property
    def reranker_residual(self) -> Residual | None:
        """The cosine the served reranker corrects (a forum-trained one), else None."""
        ...


@dataclass
class Assessment:
    """What one query found and the zone it gets, before any evidence is written."""

    found: SearchOutcome
    candidates: list[Candidate]  # reranked (or in fused order), best first
    kept: list[Candidate]  # the first ``limit``
    kind: ScorerKind
    scorer: str
    top: float | None  # the best kept score: what the zone reads
    zone: Zone
    reason: str
    rerank_error: str | None
    options: SearchOptions


@dataclass
class RetrievalOutcome:
    """Everything one retrieval decided; ``as_dict`` is the response body."""

    retrieval_id: uuid.UUID
    query: str
    query_source: str
    zone: Zone
    zone_reason: str
    gate: GateDecision
    scorer: str
    top_score: float | None
    evidence: list[dict[str, Any]]
    candidates: list[dict[str, Any]]
    trace: Trace
    condensed: Condensed | None = None
    rerank_error: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    # The zone-shaped messages for an LLM (None when the zone abstains: no LLM may be asked),
    # else the fixed text the member gets instead of an answer.
    prompt: Prompt | None = None
    abstain_text: str | None = None
    locale: str = "en"  # the forum language the member's texts are written in (en, fr)
    vector: Any = None  # the query's embedding (None when gated), never serialized

    def as_dict(self) -> dict[str, Any]:
        """The JSON answer of ``POST /v1/retrieve``."""
        return {
            "retrieval_id": str(self.retrieval_id),
            "query": self.query,
            "query_source": self.query_source,
            "zone": self.zone.value,
            "zone_reason": self.zone_reason,
            "gate": {"passed": self.gate.passed,
                     "reason": self.gate.reason.value if self.gate.reason else None},
            "scorer": self.scorer,
            "top_score": self.top_score,
            "evidence": self.evidence,
            "prompt": self.prompt.as_dict() if self.prompt is not None else None,
            "abstain_text": self.abstain_text,
            "trace": self.trace.as_list(),
        }
