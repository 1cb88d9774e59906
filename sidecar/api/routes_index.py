"""POST /v1/index/events: incremental re-embedding when the forum changes."""

from __future__ import annotations

from typing import Annotated

from flask import Blueprint
from flask.typing import ResponseReturnValue
from pydantic import Field

from jobs.events import EventName, EventOutcome, apply_event
from sidecar.api.context import get_resources, parse_body, respond
from sidecar.api.openapi import documented
from sidecar.api.schemas import ResponseModel, StrictRequest

bp = Blueprint("index", __name__)

# Discourse ids are PostgreSQL integers.
ForumId = Annotated[int, Field(gt=0, lt=2**31)]


class IndexEvent(StrictRequest):
    """`POST /v1/index/events`: something changed on the forum."""

    event: EventName = Field(description=(
        "post_created, post_edited, post_recovered (ids: posts) re-embed; post_deleted, "
        "post_hidden (ids: posts) remove the vectors at once; topic_changed (ids: topics) and "
        "category_changed (ids: categories) re-check every post in scope: the ones no longer "
        "public lose their vectors at once, the others are re-embedded if their text changed."))
    ids: list[ForumId] = Field(min_length=1, max_length=1000,
                               description="Post, topic or category ids, by event.")


class IndexEventAccepted(ResponseModel):
    """What the event did at once, and the jobs it queued."""

    event: str
    ids: int = Field(description="Distinct ids received.")
    vectors_removed: int = Field(description="Vectors deleted before answering.")
    queued_posts: int = Field(description="Public posts queued for re-embedding (post events).")
    job_ids: list[str] = Field(description="RQ jobs on the index queue.")

    @classmethod
    def of(cls, outcome: EventOutcome) -> IndexEventAccepted:
        """The answer for what ``apply_event`` did."""
        return cls(event=outcome.event, ids=len(outcome.ids), vectors_removed=outcome.removed,
                   queued_posts=outcome.queued_posts, job_ids=outcome.job_ids)


@bp.post("/v1/index/events")
@documented(tag="index", request=IndexEvent, response=IndexEventAccepted, status=202,
            summary="Tell the sidecar what changed on the forum; vectors follow.")
def index_events() -> ResponseReturnValue:
    """Remove vectors that must go now; queue the re-embedding of the rest."""
    body = parse_body(IndexEvent)
    outcome = apply_event(get_resources(), body.event, body.ids)
    return respond(IndexEventAccepted, IndexEventAccepted.of(outcome), 202)
