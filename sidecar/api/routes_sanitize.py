"""POST /v1/sanitize: turn an LLM answer's [[n]] citations into checked post-level links."""

from __future__ import annotations

import uuid
from typing import Literal

from flask import Blueprint
from flask.typing import ResponseReturnValue
from pydantic import Field

from sidecar.api.context import get_resources, parse_body, respond
from sidecar.api.openapi import documented
from sidecar.api.schemas import ResponseModel, StrictRequest
from sidecar.core.sanitize import MAX_TEXT_CHARS

bp = Blueprint("sanitize", __name__)


class SanitizeRequest(StrictRequest):
    """`POST /v1/sanitize`."""

    retrieval_id: uuid.UUID = Field(description="The retrieval_id POST /v1/retrieve returned.")
    text: str = Field(min_length=1, description=(
        f"The LLM's answer, citing evidence as [[n]] or [[1, 3]] (at most {MAX_TEXT_CHARS} "
        "characters; longer is a 413)."))


class CitationModel(ResponseModel):
    """A citation kept in the answer, linked to the post as it is now."""

    n: int
    post_id: int
    topic_id: int
    url: str
    title: str


class RemovalModel(ResponseModel):
    """Something removed from the answer."""

    kind: Literal["citation", "link", "html"]
    value: str = Field(description="What was removed (cut to 200 characters).")
    reason: str


class SanitizeResponse(ResponseModel):
    """`POST /v1/sanitize` answer."""

    text: str = Field(description="Markdown: the answer with checked links, Sources and a call "
                                  "to action in the forum's language.")
    citations: list[CitationModel]
    removed: list[RemovalModel]
    outcome: Literal["answered", "no_answer"] = Field(description=(
        "no_answer when the reply is the prompt's refusal sentinel: then text is the abstain "
        "text and none of the reply's words are kept."))


@bp.post("/v1/sanitize")
@documented(tag="answer", request=SanitizeRequest, response=SanitizeResponse,
            errors=(400, 401, 404, 413, 422),
            summary="Rewrite [[n]] citations into links to public posts of that retrieval and "
                    "remove every other link, image and HTML tag.")
def sanitize() -> ResponseReturnValue:
    """Sanitize one answer against its retrieval, re-checking now that each post is public."""
    body = parse_body(SanitizeRequest)
    finished = get_resources().sanitizer().sanitize(str(body.retrieval_id), body.text)
    result = finished.result
    return respond(SanitizeResponse, {"text": result.text, "citations": result.citations,
                                      "removed": result.removed, "outcome": finished.outcome})
