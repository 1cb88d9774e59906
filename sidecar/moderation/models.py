"""What moderators send: list filters and labels (validated here, for the pages and the API)."""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sidecar.core.calibration import Label

ReviewZone = Literal["abstain", "cautious", "normal"]
AskOutcome = Literal["answered", "no_answer", "abstained", "failed", "cancelled"]


class ReviewFilters(BaseModel):
    """Filters of the review list (query-string parameters of the page and of the API)."""

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    zone: ReviewZone | None = Field(
        default=None, description="abstain, cautious or normal (default: abstain and cautious; "
                                  "every zone with an outcome)")
    outcome: AskOutcome | None = Field(
        default=None, description="only retrievals with an ask (POST /v1/answer or "
                                  "/v1/sanitize) that ended so")
    labelled: Literal["yes", "no"] | None = Field(default=None, description="yes or no")
    label: Label | None = None
    scorer: str | None = Field(default=None, max_length=200)
    date_from: date | None = Field(default=None, alias="from",
                                   description="first day (UTC), YYYY-MM-DD")
    date_to: date | None = Field(default=None, alias="to",
                                 description="last day (UTC, included), YYYY-MM-DD")
    q: str | None = Field(default=None, max_length=200,
                          description="text in the query or the conversation")
    page: int = Field(default=1, ge=1, le=100_000)
    per_page: int = Field(default=25, ge=1, le=100)

    @field_validator("scorer", "q")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        value = (value or "").strip()
        return value or None

    @model_validator(mode="after")
    def _dates_in_order(self) -> ReviewFilters:
        if self.date_from and self.date_to and self.date_from > self.date_to:
            raise ValueError("'from' is after 'to'")
        return self

    @classmethod
    def from_args(cls, args: dict[str, str]) -> ReviewFilters:
        """From a query string: empty parameters (a submitted empty form field) are absent."""
        return cls.model_validate({k: v for k, v in args.items() if v != ""})

    def query_args(self, **changes: Any) -> dict[str, str]:
        """The query-string form of these filters (for links to other pages of the list)."""
        data = self.model_dump(by_alias=True, exclude_none=True)
        data.update(changes)
        defaults = {"page": 1, "per_page": 25}
        return {k: str(v) for k, v in data.items() if defaults.get(k) != v}


class LabelRequest(BaseModel):
    """A moderator's verdict on one retrieval.

    ``should_have_answered`` needs the topic that answers the question; ``wrong_evidence`` may
    name it; ``correct_abstention`` has none.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    label: Label
    right_topic_id: int | None = Field(default=None, ge=1, le=2**31 - 1)
    note: str | None = Field(default=None, max_length=2000)
    moderator: str | None = Field(default=None, max_length=100)

    @field_validator("note", "moderator")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        value = (value or "").strip()
        return value or None

    @model_validator(mode="after")
    def _topic_matches_label(self) -> LabelRequest:
        if self.label == "should_have_answered" and self.right_topic_id is None:
            raise ValueError("should_have_answered needs right_topic_id: the topic that answers")
        if self.label == "correct_abstention" and self.right_topic_id is not None:
            raise ValueError("correct_abstention takes no right_topic_id")
        return self


class GapQuery(BaseModel):
    """The content-gap view's parameters (``GET /v1/moderation/gaps``, ``/moderation/gaps``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    days: int = Field(default=30, ge=1, le=365,
                      description="the period: the last this many days (UTC)")
    examples: int = Field(default=5, ge=1, le=50,
                          description="example questions shown per subject, newest first")

    @classmethod
    def from_args(cls, args: dict[str, str]) -> GapQuery:
        """From a query string: empty parameters are absent."""
        return cls.model_validate({k: v for k, v in args.items() if v != ""})
