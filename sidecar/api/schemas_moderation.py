"""Answers of the moderation JSON API (``/v1/moderation``): what they send is what they document.

The review list and a retrieval come from ``sidecar.moderation.service`` as dicts (the pages
render the same ones); the calibration report is read from the core's ``ScorerReport``.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, computed_field

from sidecar.api.schemas import ResponseModel
from sidecar.core.calibration import Label
from sidecar.core.zones import ScorerKind


class ItemLabel(ResponseModel):
    """A moderator's label of a retrieval."""

    label: Label
    right_topic_id: int | None
    note: str | None
    moderator: str | None
    labelled_at: str = Field(description="ISO 8601 timestamp.")


class LabelResponse(ItemLabel):
    """`POST /v1/moderation/retrievals/{retrieval_id}/label`: the label as stored."""

    retrieval_id: str


class CitedPost(ResponseModel):
    """A post an answer cites: withheld (its number only) when it is no longer public."""

    n: int | None
    post_id: int | None = None
    title: str | None = None
    url: str | None = None
    withheld: bool = False


class Ask(ResponseModel):
    """One ask of a retrieval (``POST /v1/answer``, or ``/v1/sanitize``: ``source``)."""

    id: str
    created_at: str = Field(description="ISO 8601 timestamp.")
    source: Literal["answer", "sanitize"]
    outcome: Literal["answered", "no_answer", "abstained", "failed", "cancelled"]
    failure_stage: str | None
    failure: str | None
    llm: str | None = Field(description="The LLM server's kind: ollama or openai.")
    model: str | None
    streamed: bool
    markdown: str | None = Field(
        description="The sanitized Markdown the member was shown; null when withheld.")
    withheld: bool = Field(
        description="True when a post it cites or was written from is no longer public.")
    cited: list[CitedPost]
    removed: dict[str, int] = Field(
        description="What the sanitizer removed: citations, links, html.")
    first_token_ms: float | None
    total_ms: float | None
    prompt_tokens: int | None
    reply_tokens: int | None


class ReviewItem(ResponseModel):
    """One retrieval of the review list (abstain and cautious ones unless filtered)."""

    id: str
    created_at: str = Field(description="ISO 8601 timestamp.")
    zone: Literal["normal", "cautious", "abstain"]
    zone_reason: str | None = Field(
        description="Why this zone: which score decided, against which thresholds (the "
                    "forum's calibration or the settings'); null when the input gate decided.")
    query: str
    query_source: str
    gate_reason: str | None
    scorer: str
    top_score: float | None
    locale: str | None
    evidence_count: int
    top_title: str | None
    label: ItemLabel | None
    answers: list[Ask] = Field(description="Its asks, oldest first; empty when none.")


class ReviewList(ResponseModel):
    """`GET /v1/moderation/retrievals`: one page of the review list."""

    items: list[ReviewItem]
    total: int
    page: int
    per_page: int
    pages: int


class RetrievalDetail(ReviewItem):
    """`GET /v1/moderation/retrievals/{retrieval_id}`: everything stored about a retrieval."""

    conversation: list[dict[str, Any]] = Field(description="The messages as received.")
    scores: list[float | None] = Field(
        description="Relevance of each evidence item, in order (null: the scorer gave none).")
    evidence: list[dict[str, Any]] = Field(description="The evidence as /v1/retrieve answered.")
    trace: list[dict[str, Any]]
    candidates: list[dict[str, Any]] = Field(
        description="The wider list considered, each with its topic's title if public now.")


class ThresholdsModel(ResponseModel):
    """Zone thresholds of one scorer."""

    abstain: float
    normal: float


class SplitCounts(ResponseModel):
    """Labels of each side below and at-or-above the suggested threshold."""

    low_below: int
    low_above: int
    high_below: int
    high_above: int


class BalancedError(ResponseModel):
    """Balanced error rate at the configured and at the suggested threshold."""

    configured: float | None
    suggested: float | None


class SplitModel(ResponseModel):
    """The threshold suggested for one boundary (``sidecar.core.calibration.Split``)."""

    boundary: Literal["abstain", "normal"]
    configured: float
    suggested: float | None
    low_label: str
    high_label: str
    note: str
    # Answered grouped, under ``counts`` and ``balanced_error``.
    low_below: int = Field(exclude=True)
    low_above: int = Field(exclude=True)
    high_below: int = Field(exclude=True)
    high_above: int = Field(exclude=True)
    error_configured: float | None = Field(exclude=True)
    error_suggested: float | None = Field(exclude=True)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def counts(self) -> SplitCounts:
        """The labels on each side of the suggestion."""
        return SplitCounts(low_below=self.low_below, low_above=self.low_above,
                           high_below=self.high_below, high_above=self.high_above)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def balanced_error(self) -> BalancedError:
        """How well each threshold separates the labels."""
        return BalancedError(configured=self.error_configured, suggested=self.error_suggested)


class ScorerCalibration(ResponseModel):
    """Calibration of one scorer (``sidecar.core.calibration.ScorerReport``)."""

    scorer: str
    kind: ScorerKind
    configured: ThresholdsModel
    suggested: ThresholdsModel
    abstain: SplitModel
    normal: SplitModel
    labels: dict[str, int]
    unscored_labels: int
    scored_retrievals: int
    zone_changes: dict[str, int] = Field(description='Retrievals per change, "abstain→normal".')
    changed: int = Field(description="Stored retrievals whose zone would change.")


class CalibrationResponse(ResponseModel):
    """`GET /v1/moderation/calibration`."""

    configured: dict[str, ThresholdsModel] = Field(
        description="The thresholds in use, by kind of scorer.")
    scorers: list[ScorerCalibration]


class GapExample(ResponseModel):
    """One unanswered question: the standalone question the member asked."""

    retrieval_id: str
    asked_at: str = Field(description="ISO 8601 timestamp.")
    query: str
    outcome: Literal["abstained", "no_answer"]


class GapGroup(ResponseModel):
    """One subject the forum does not answer."""

    count: int
    last_asked: str = Field(description="ISO 8601 timestamp.")
    examples: list[GapExample] = Field(description="Newest first.")


class GapsResponse(ResponseModel):
    """`GET /v1/moderation/gaps`: the period's unanswered questions grouped into subjects."""

    since: str
    until: str
    days: int
    model: str = Field(description="The embedding model whose question vectors are grouped.")
    similarity: float = Field(description="SIDECAR_GAP_SIMILARITY: the grouping's threshold.")
    questions: int = Field(description="Questions read and grouped.")
    capped: bool = Field(description="True when the period holds more than "
                                     "SIDECAR_GAP_MAX_QUESTIONS: the most recent were read.")
    groups: list[GapGroup] = Field(description="By count, then the most recently asked.")
