"""The moderators' JSON API: ``/v1/moderation`` (the review list, one retrieval, labels, the
calibration the labels suggest).

It takes ``Authorization: Bearer <SIDECAR_MODERATOR_KEY>``, never the API key: a request without
it is refused and never counted as a guess; wrong keys are counted per client address and
throttled (``sidecar.moderation.auth``). Its errors are the usual JSON. The HTML pages that share
its key are in :mod:`sidecar.api.routes_moderation`.
"""

from __future__ import annotations

from flask import Blueprint, request
from flask.typing import ResponseReturnValue
from werkzeug.exceptions import TooManyRequests

from models.web.auth import request_bearer
from sidecar.api.context import get_resources, respond
from sidecar.api.openapi import documented
from sidecar.api.schemas_moderation import (
    CalibrationResponse,
    GapsResponse,
    LabelResponse,
    RetrievalDetail,
    ReviewList,
)
from sidecar.errors import ServiceUnavailable, Unauthorized
from sidecar.moderation.auth import Attempt, ModeratorAuth
from sidecar.moderation.models import GapQuery, LabelRequest, ReviewFilters
from sidecar.moderation.service import ModerationService, item_json, parse_id

api = Blueprint("api", __name__, url_prefix="/v1/moderation")

DISABLED = "moderation is disabled: set SIDECAR_MODERATOR_KEY to enable the review pages and API"


def moderator_auth() -> ModeratorAuth:
    """The process's moderator key check (its throttle is shared through Redis)."""
    return get_resources().moderator_auth()


def moderation_service() -> ModerationService:
    """The review queue and labels."""
    return get_resources().moderation()


def client_address() -> str:
    """The client's address, for the throttle."""
    # The client's address as the trusted proxies report it (sidecar/api/proxy.py).
    return request.remote_addr or "unknown"


@api.before_request
def _api_authenticate() -> None:
    auth = moderator_auth()
    if not auth.enabled:
        raise ServiceUnavailable(DISABLED)
    outcome = auth.attempt(client_address(), request_bearer())
    if outcome is Attempt.THROTTLED:  # a client past its limit: its key was not even compared
        raise TooManyRequests("too many failed attempts with a wrong moderator key; "
                              "wait a while")
    if outcome is Attempt.MISSING:  # no key: not a guess, never counted
        raise Unauthorized("send Authorization: Bearer <SIDECAR_MODERATOR_KEY>")
    if outcome is Attempt.WRONG:
        raise Unauthorized("invalid moderator key: send Authorization: Bearer "
                           "<SIDECAR_MODERATOR_KEY>")


# Every answer of the API: no key or a wrong one (401), too many wrong ones (429), moderation
# off (503).
_API_ERRORS = (401, 429, 503)


@api.get("/retrievals")
@documented(tag="moderation", auth="moderator", query=ReviewFilters, response=ReviewList,
            errors=(*_API_ERRORS, 400, 422),
            summary="Abstain and cautious retrievals (every zone with an outcome), newest "
                    "first, with their asks and filters.")
def api_list() -> ResponseReturnValue:
    """A page of the review list."""
    filters = ReviewFilters.from_args(request.args.to_dict())
    page = moderation_service().review(filters)
    return respond(ReviewList, {"items": [item_json(r, page.answers.get(r.id))
                                          for r in page.items], "total": page.total,
                                "page": filters.page, "per_page": filters.per_page,
                                "pages": page.pages})


@api.get("/retrievals/<retrieval_id>")
@documented(tag="moderation", auth="moderator", response=RetrievalDetail,
            errors=(*_API_ERRORS, 404),
            summary="One retrieval: conversation, query, scores, evidence, candidates, label.")
def api_detail(retrieval_id: str) -> ResponseReturnValue:
    """One retrieval."""
    return respond(RetrievalDetail, moderation_service().detail(parse_id(retrieval_id)))


@api.post("/retrievals/<retrieval_id>/label")
@documented(tag="moderation", auth="moderator", request=LabelRequest, response=LabelResponse,
            errors=(*_API_ERRORS, 400, 404, 413, 422),
            summary="Label a retrieval (replaces an earlier label).")
def api_label(retrieval_id: str) -> ResponseReturnValue:
    """Store a label."""
    rid = parse_id(retrieval_id)
    body = LabelRequest.model_validate_json(request.get_data(cache=True) or b"", strict=True)
    return respond(LabelResponse, moderation_service().label(rid, body))


@api.get("/gaps")
@documented(tag="moderation", auth="moderator", query=GapQuery, response=GapsResponse,
            errors=(*_API_ERRORS, 422),
            summary="The questions the forum did not answer over a period, grouped by subject.")
def api_gaps() -> ResponseReturnValue:
    """The content gaps."""
    query = GapQuery.from_args(request.args.to_dict())
    return respond(GapsResponse, moderation_service().gaps(query))


@api.get("/calibration")
@documented(tag="moderation", auth="moderator", response=CalibrationResponse,
            errors=_API_ERRORS,
            summary="Thresholds the labels suggest per scorer, and the zone changes they cause.")
def api_calibration() -> ResponseReturnValue:
    """The calibration report."""
    return respond(CalibrationResponse, {"configured": configured_zones(),
                                         "scorers": moderation_service().calibration()})


def configured_zones() -> dict[str, dict[str, float]]:
    """The thresholds set in the environment, per scorer (before any calibration)."""
    s = get_resources().settings
    return {"cross-encoder": {"abstain": s.zone_ce_abstain, "normal": s.zone_ce_normal},
            "bi-encoder": {"abstain": s.zone_cos_abstain, "normal": s.zone_cos_normal}}
