"""Request and response models of ``POST /v1/answer``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sidecar.api.schemas import EvidenceModel, ResponseModel, RetrieveRequest, TraceStepModel

Outcome = Literal["answered", "no_answer", "abstained", "failed", "cancelled"]


class AnswerRequest(RetrieveRequest):
    """`POST /v1/answer`: the fields of `/v1/retrieve`, and whether to stream."""

    stream: bool = Field(default=False, description=(
        "true: Server-Sent Events (retrieval, then the sanitized text as it grows in delta "
        "events, then the whole answer); false: one JSON answer."))


class AnswerMarkdown(ResponseModel):
    """What the member is shown."""

    markdown: str = Field(description="Sanitized Markdown: post-level links and a Sources "
                                      "footer, or the abstain text, or the posts that may answer.")


class CitedModel(ResponseModel):
    """A citation kept in the answer, linked to the post as it is now."""

    n: int
    post_id: int
    topic_id: int
    url: str
    title: str


class RemovedItem(ResponseModel):
    """Something the sanitizer took out of the LLM's reply."""

    kind: Literal["citation", "link", "html"]
    value: str
    reason: str


class RemovedModel(ResponseModel):
    """What the sanitizer took out, counted and listed."""

    citations: int
    links: int
    html: int
    items: list[RemovedItem]


class UsageModel(ResponseModel):
    """Tokens, where the LLM server reports them."""

    prompt_tokens: int | None
    reply_tokens: int | None


class TimingsModel(ResponseModel):
    """Time to the LLM's first token (from its call) and in all (from the request)."""

    first_token_ms: float | None
    total_ms: float | None


class AnswerResponse(ResponseModel):
    """`POST /v1/answer` answer (and the stream's last event, ``answer``)."""

    answer_id: str
    retrieval_id: str
    zone: Literal["normal", "cautious", "abstain"]
    zone_reason: str
    outcome: Outcome = Field(description=(
        "answered; abstained (zone abstain: no LLM call); no_answer (the LLM said the evidence "
        "does not answer: the abstain text); failed (the LLM failed or the deadline passed: "
        "the evidence as posts that may answer); cancelled (a stream the client left)."))
    failure_stage: str | None
    failure: str | None = Field(description="Why it failed, as a short code (timeout, "
                                            "error:http_500...).")
    answer: AnswerMarkdown
    cited: list[CitedModel]
    removed: RemovedModel
    evidence: list[EvidenceModel]
    llm: str | None = Field(description="The LLM server's kind: ollama or openai.")
    model: str | None
    usage: UsageModel
    timings: TimingsModel
    trace: list[TraceStepModel]
