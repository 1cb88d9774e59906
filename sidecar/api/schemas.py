"""Request and response models (pydantic): validation and the OpenAPI description in one place."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    WithJsonSchema,
    model_validator,
)

from sidecar.core.fusion import DEFAULT_LIFT, Fusion, FusionMethod
from sidecar.core.gate import GateReason
from sidecar.core.postchoice import Chooser
from sidecar.core.types import Leg, Mode, TopicScore
from sidecar.search.service import SearchOptions


class StrictRequest(BaseModel):
    """Requests are strict: wrong types and unknown fields are 4xx errors, not guesses."""

    model_config = ConfigDict(strict=True, extra="forbid", frozen=True)


class ResponseModel(BaseModel):
    """Responses are serialized through their model (``respond`` in ``context.py``): a field the
    model does not declare fails there, so what the API sends is what its OpenAPI says."""

    model_config = ConfigDict(extra="forbid")


# A timestamp as ``datetime.isoformat()`` writes it ("+00:00", not pydantic's "Z"): what the
# routes answered before they went through their models, and what the CLI prints.
IsoDateTime = Annotated[datetime, PlainSerializer(datetime.isoformat, return_type=str),
                        WithJsonSchema({"type": "string", "format": "date-time"})]


class FusionRequest(StrictRequest):
    """How to fuse the legs of a hybrid search (default: the served configuration)."""

    method: FusionMethod = Field(description="lift (similarity lifted by keyword scores), rrf "
                                             "(ranks), zscore or minmax (normalised scores).")
    weights: dict[Leg, float] = Field(
        default_factory=dict,
        description="Weight per leg (>= 0; a leg not named weighs 1; 0 switches it off).")
    rrf_k: int = Field(default=60, ge=0, le=10_000, description="RRF's k (rrf only).")
    lift: float = Field(default=DEFAULT_LIFT, ge=0, le=1,
                        description="How far keyword scores may lift a post, in cosine units "
                                    "(lift only).")

    @model_validator(mode="after")
    def _check_weights(self) -> FusionRequest:
        for leg, weight in self.weights.items():
            if not 0 <= weight <= 1_000:
                raise ValueError(f"weight of {leg.value} must be between 0 and 1000")
        if self.weights and not any(self.weights.get(leg, 1.0) > 0 for leg in Leg):
            raise ValueError("at least one leg needs a weight above 0")
        return self

    def to_fusion(self) -> Fusion:
        """The core value."""
        return Fusion(self.method, (), self.rrf_k, self.lift).with_weights(
            {leg.value: w for leg, w in self.weights.items()})


class SearchRequest(StrictRequest):
    """`POST /v1/search`."""

    query: str = Field(min_length=1, description="The member's question or keywords (for a "
                       "question with details: its title or gist).")
    details: str | None = Field(
        default=None, max_length=100_000,
        description="The rest of the question, e.g. the body of a topic being written whose "
                    "title is `query`: the semantic leg reads query and details, the keyword "
                    "leg matches the query's words only (SIDECAR_MAX_DETAILS_CHARS).")
    limit: int = Field(default=10, ge=1, le=50, description="Topics to return.")
    mode: Mode | None = Field(default=None,
                              description="Which legs to run (default: the served mode).")
    fusion: FusionRequest | None = Field(
        default=None, description="Fusion of a hybrid search (default: the served fusion).")
    strategy: int | None = Field(
        default=None, ge=1, le=2, description="Embedding strategy (default: the setting)."
    )
    topic_score: TopicScore | None = Field(
        default=None, description="Topic score from its posts: best post, or mean of best two."
    )
    link: Chooser | None = Field(
        default=None, description="Which post each result links to: answer (the accepted "
                                  "answer, else the reply most similar to the question), fused "
                                  "(the post that ranked the topic) or semantic (the most "
                                  "similar post). Default: SIDECAR_LINK_CHOOSER.")

    def options(self) -> SearchOptions:
        """The search options this request asks for (None: as served)."""
        return SearchOptions(mode=self.mode, strategy=self.strategy,
                             topic_score=self.topic_score,
                             fusion=self.fusion.to_fusion() if self.fusion else None,
                             chooser=self.link)


class PostRef(ResponseModel):
    """The post that represents a topic in a result: the one the link points at."""

    id: int
    post_number: int
    excerpt: str
    url: str
    chosen: str = Field(description="Why this post: accepted answer, reply most similar to the "
                                    "question, ... (SIDECAR_LINK_CHOOSER).")


class TopicHitModel(ResponseModel):
    """A ranked topic, linked at the level of the post that answers (search, related,
    similar)."""

    rank: int
    topic_id: int
    title: str
    slug: str
    category: str
    score: float = Field(description="The fused score that ranked it.")
    url: str = Field(description="Post-level link /t/{slug}/{topic_id}/{post_number}.")
    post: PostRef


class SearchHit(TopicHitModel):
    """One topic of a search result."""

    ranks: dict[str, int | None] = Field(description="Rank in each leg of the topic's best "
                                         "fused post (what ranked it).")
    leg_scores: dict[str, float]
    matched_posts: int


class TraceStepModel(ResponseModel):
    """One pipeline stage."""

    step: str
    status: str = Field(description="done, skipped or error")
    ms: float
    detail: dict[str, Any]


class SearchResponse(ResponseModel):
    """`POST /v1/search` answer."""

    query: str
    mode: Mode
    config: dict[str, Any] = Field(description="What the search ran: legs, fusion, topic score.")
    strategy: int
    model: str
    results: list[SearchHit]
    trace: list[TraceStepModel]
    took_ms: float


class ErrorBody(ResponseModel):
    """Every error: a stable code, a message for humans, optional details; a server-side error
    (5xx) names the request id under which the sidecar's log holds what went wrong."""

    code: str
    message: str
    details: Any = None
    request_id: str | None = None


class ErrorResponse(ResponseModel):
    """The body of every 4xx/5xx answer."""

    error: ErrorBody


# --- POST /v1/retrieve -------------------------------------------------------------------------

# Hard limits of the request itself (a 422): the input gate judges the latest message's length
# separately (SIDECAR_MAX_QUERY_CHARS, answered as zone abstain with reason too_long).
RETRIEVE_MAX_MESSAGES = 50
RETRIEVE_MAX_MESSAGE_CHARS = 20_000


class ChatMessage(StrictRequest):
    """One message of the conversation with the forum's assistant."""

    role: Literal["user", "assistant"]
    content: str = Field(max_length=RETRIEVE_MAX_MESSAGE_CHARS)


class RetrieveRequest(StrictRequest):
    """`POST /v1/retrieve`."""

    messages: list[ChatMessage] = Field(
        min_length=1, max_length=RETRIEVE_MAX_MESSAGES,
        description="The conversation, oldest first; the last message is the member's.",
    )
    limit: int | None = Field(
        default=None, ge=1, le=12,
        description="Evidence items to return (default: SIDECAR_RETRIEVE_LIMIT, 6).",
    )
    locale: str | None = Field(
        default=None, pattern=r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$", max_length=35,
        description="The member's locale (e.g. fr, en-GB); stored with the retrieval.",
    )
    asker: str | None = Field(
        default=None, min_length=16, max_length=128, pattern=r"^[A-Za-z0-9_=.:+/-]+$",
        description="Who asks, as an opaque id: an HMAC or hash of the member's id (e.g. "
                    "hex of HMAC-SHA256(forum secret, user id)), never the id itself. Stored "
                    "with the retrieval: the zone calibration counts at most a few questions "
                    "per asker (docs/answerability.md).",
    )

    @model_validator(mode="after")
    def _last_is_user(self) -> RetrieveRequest:
        if self.messages[-1].role != "user":
            raise ValueError("the last message must be the member's (role \"user\")")
        return self


class NeighbourModel(ResponseModel):
    """A post near the evidence post in the same topic."""

    post_id: int
    post_number: int
    url: str
    excerpt: str


class EvidenceModel(ResponseModel):
    """One numbered evidence item: cite it as [[n]]."""

    n: int
    topic_id: int
    title: str
    post_id: int
    post_number: int
    url: str = Field(description="Post-level link /t/{slug}/{topic_id}/{post_number}.")
    excerpt: str = Field(description="About SIDECAR_EVIDENCE_CHARS characters around the best "
                                     "match, without quotes, Markdown or HTML.")
    score: float | None = Field(description="Relevance of this item for the scorer.")
    neighbours: list[NeighbourModel]


class GateModel(ResponseModel):
    """The input gate's verdict on the latest message."""

    passed: bool
    reason: GateReason | None


class PromptMessageModel(ResponseModel):
    """One chat message (discourse-ai's ``llm.generate`` calls ``role`` ``type``)."""

    role: Literal["system", "user"]
    content: str


class PromptModel(ResponseModel):
    """The zone-shaped messages for an assistant that brings its own LLM."""

    messages: list[PromptMessageModel]
    refusal: str = Field(description="What the LLM replies when the evidence does not answer; "
                                     "/v1/sanitize turns that reply into the abstain text.")


class RetrieveResponse(ResponseModel):
    """`POST /v1/retrieve` answer."""

    retrieval_id: str = Field(description="Pass it to /v1/sanitize with the LLM's answer.")
    query: str = Field(description="The standalone query used ('' when the gate refused).")
    query_source: Literal["single_turn", "llm", "cache", "fallback", "gate"]
    zone: Literal["normal", "cautious", "abstain"]
    zone_reason: str
    gate: GateModel
    scorer: str = Field(description="cross-encoder:<model>, bi-encoder:<model> or none.")
    top_score: float | None
    evidence: list[EvidenceModel]
    prompt: PromptModel | None = Field(description=(
        "The messages to send to an LLM (answer from the evidence, cite [[n]], the refusal "
        "clause), shaped by the zone; null when the zone is abstain: call no LLM then."))
    abstain_text: str | None = Field(description=(
        "With zone abstain: the fixed text to show instead of an answer (the forum's "
        "language), else null."))
    trace: list[TraceStepModel]


class HealthResponse(ResponseModel):
    """`GET /v1/health` answer: ``{"status": "ok"}`` without the API key, everything with it."""

    status: Literal["ok"]
    version: str | None = Field(default=None, description="With the API key, as what follows.")
    database: Literal["embedded", "external"] | None = None
    redis: Literal["embedded", "external"] | None = None
    pgvector: str | None = Field(default=None, description="The extension's version.")
    models: dict[str, Any] | None = Field(
        default=None, description="Embedder and reranker: name, execution provider, or why the "
                                  "reranker failed to load.")
    search: dict[str, Any] | None = Field(default=None, description="What search serves.")
    onnxruntime: dict[str, Any] | None = None
    keyword_index: dict[str, Any] | None = Field(
        default=None, description="This node's keyword index: documents, last sync, error.")


class ReadyResponse(ResponseModel):
    """`GET /v1/ready` answer: 200 when every dependency answers, else 503 with the same body."""

    ready: bool
    checks: dict[str, bool] = Field(description="database, redis: whether each one answers.")


class OpenAPIDocument(ResponseModel):
    """`GET /v1/openapi.json` answer (OpenAPI 3.1, as built by ``sidecar.api.openapi``)."""

    openapi: str
    info: dict[str, Any]
    paths: dict[str, Any]
    components: dict[str, Any]
