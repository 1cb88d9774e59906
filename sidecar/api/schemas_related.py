"""Request and response models of related topics and the composer's similar topics."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sidecar.api.schemas import (
    ResponseModel,
    SearchHit,
    StrictRequest,
    TopicHitModel,
    TraceStepModel,
)
from sidecar.related.service import MAX_LIMIT as RELATED_MAX
from sidecar.related.similar import MAX_LIMIT as SIMILAR_MAX

# --- GET /v1/topics/<id>/related ---------------------------------------------------------------


class RelatedQuery(BaseModel):
    """Query string of `GET /v1/topics/<id>/related` (strings are converted: it is a URL)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    limit: int = Field(default=5, ge=1, le=RELATED_MAX, description="Topics to return.")
    closed: bool = Field(default=True, description="List closed topics too (false: only "
                                                   "topics still open).")
    archived: bool = Field(default=True, description="List archived topics too.")


class RelatedHit(SearchHit):
    """One related topic."""

    similarity: float | None = Field(description="Cosine of its public post most similar to "
                                                 "the topic (None: keyword leg only).")
    topic_url: str = Field(description="The topic's link /t/{slug}/{topic_id}.")
    closed: bool
    archived: bool


class RelatedResponse(ResponseModel):
    """`GET /v1/topics/<id>/related` answer."""

    topic_id: int
    title: str
    model: str
    strategy: int
    config: dict[str, Any] = Field(description="What ranked the list: legs, fusion, topic "
                                               "score.")
    cache: Literal["hit", "miss", "off"] = Field(
        description="hit: the ranked list came from the cache (what is shown is read now); "
                    "off: SIDECAR_RELATED_CACHE_TTL_S is 0.")
    results: list[RelatedHit]
    trace: list[TraceStepModel]
    took_ms: float


# --- POST /v1/similar --------------------------------------------------------------------------


class SimilarRequest(StrictRequest):
    """`POST /v1/similar`: a topic being written."""

    title: str = Field(min_length=1, description="The topic's title, as typed so far.")
    raw: str = Field(default="", max_length=100_000,
                     description="Its body (Markdown), as typed so far; may be empty.")
    limit: int = Field(default=5, ge=1, le=SIMILAR_MAX, description="Topics to return at most.")


class SimilarHit(TopicHitModel):
    """A topic that may already answer the question being written."""

    similarity: float = Field(description="Cosine of its public post most similar to the "
                                          "question: at least the threshold.")
    topic_url: str


class SimilarResponse(ResponseModel):
    """`POST /v1/similar` answer: ``results`` is empty when nothing is close enough."""

    title: str
    silent: bool = Field(description="True when no topic reached the threshold.")
    threshold: float
    threshold_source: str = Field(description="The calibrated zone threshold it is, or the "
                                              "setting when the forum is not calibrated.")
    best_similarity: float | None = Field(description="The best topic's similarity, shown or "
                                                      "not (None: nothing matched).")
    model: str
    results: list[SimilarHit]
    trace: list[TraceStepModel]
    took_ms: float
