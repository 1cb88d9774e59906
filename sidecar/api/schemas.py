"""Request and response models (pydantic): validation and the OpenAPI description in one place."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sidecar.core.types import Mode, TopicScore


class StrictRequest(BaseModel):
    """Requests are strict: wrong types and unknown fields are 4xx errors, not guesses."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class SearchRequest(StrictRequest):
    """`POST /v1/search`."""

    query: str = Field(min_length=1, description="The member's question or keywords.")
    limit: int = Field(default=10, ge=1, le=50, description="Topics to return.")
    mode: Mode = Field(default=Mode.HYBRID, description="Which legs to run.")
    strategy: int | None = Field(
        default=None, ge=1, le=2, description="Embedding strategy (default: the setting)."
    )
    topic_score: TopicScore | None = Field(
        default=None, description="Topic score from its posts: best post, or mean of best two."
    )


class PostRef(BaseModel):
    """The post that represents a topic in a result."""

    id: int
    post_number: int
    excerpt: str
    url: str


class SearchHit(BaseModel):
    """One topic of a search result."""

    rank: int
    topic_id: int
    title: str
    slug: str
    category: str
    score: float
    url: str = Field(description="Post-level link /t/{slug}/{topic_id}/{post_number}.")
    post: PostRef
    ranks: dict[str, int | None] = Field(description="Rank of the best post in each leg.")
    leg_scores: dict[str, float]
    matched_posts: int


class TraceStepModel(BaseModel):
    """One pipeline stage."""

    step: str
    status: str = Field(description="done, skipped or error")
    ms: float
    detail: dict[str, Any]


class SearchResponse(BaseModel):
    """`POST /v1/search` answer."""

    query: str
    mode: Mode
    strategy: int
    model: str
    results: list[SearchHit]
    trace: list[TraceStepModel]
    took_ms: float


class ErrorBody(BaseModel):
    """Every error: a stable code, a message for humans, optional details."""

    code: str
    message: str
    details: Any = None


class ErrorResponse(BaseModel):
    """The body of every 4xx/5xx answer."""

    error: ErrorBody
