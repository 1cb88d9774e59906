"""POST /v1/discourse/webhook: a stock Discourse's own webhooks, instead of a plugin.

A delivery is authenticated by ``X-Discourse-Event-Signature: sha256=<hex HMAC-SHA256 of the raw
body>`` with ``SIDECAR_DISCOURSE_WEBHOOK_SECRET`` (the route answers 404 while that is unset) and
turned into the same index events as ``POST /v1/index/events``, as hints.

The signature covers the body only, as Discourse signs it: the ``X-Discourse-Event`` and
``X-Discourse-Event-Id`` headers are not signed, and anyone who saw one delivery can send its
body again under another event name or id. So an event is only a hint of where to look (see
:mod:`jobs.events`): a post loses its vectors only when the database says it is no longer public,
and only posts whose vectors need work are queued. A delivery that changed something is
remembered once applied, per digest of its body and the index event its name stands for (a
Redis key shared by every API node), whatever its event id: a redelivery by Discourse, or a
replay, is then a ``duplicate`` (``topic_*`` names are many, ``topic_changed`` is one). One that
changed nothing is not remembered (it may have come before the forum's commit, or been read
from a lagging replica: Discourse's redelivery is applied again) and is looked at again by the
worker ``SIDECAR_DISCOURSE_RECHECK_S`` later. Deliveries are snapshots that may arrive late or
out of order; the database is read when the event is applied. Every signed
delivery gets a 2xx at once (unknown events: ``ignored``), so Discourse neither retries nor
deactivates the hook. Its bodies may be larger than other routes' (a long post's raw and cooked
text): ``SIDECAR_DISCOURSE_WEBHOOK_MAX_BYTES`` is its own limit.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any, Literal

from flask import Blueprint, request
from flask.typing import ResponseReturnValue
from pydantic import BaseModel, ConfigDict, Field

from jobs.events import apply_event, schedule_recheck
from sidecar.api.context import get_resources, respond
from sidecar.api.openapi import documented
from sidecar.api.routes_index import IndexEventAccepted
from sidecar.api.schemas import ResponseModel
from sidecar.errors import BadRequest, InvalidInput, NotFound, SidecarError, Unauthorized

bp = Blueprint("discourse", __name__)

# Discourse retries a failed delivery over about 2.6 hours, and an admin may redeliver one from
# its page later: a delivery is remembered for a week.
DEDUP_TTL_S = 7 * 24 * 3600
# Discourse's post events that name the same index event here; post_destroyed removes vectors.
POST_EVENTS = {"post_created": "post_created", "post_edited": "post_edited",
               "post_recovered": "post_recovered", "post_destroyed": "post_deleted"}
# Every topic_* and category_* event (created, edited, destroyed, recovered, status updated...)
# re-checks the posts in scope.
SCOPE_EVENTS = {"topic": "topic_changed", "category": "category_changed"}


class UnsupportedMediaType(SidecarError):
    """A delivery that is not JSON (the webhook's content type must be application/json)."""

    status = 415
    code = "unsupported_media_type"


class DiscourseDelivery(BaseModel):
    """What a delivery's body holds: one object under its event type (extra fields ignored)."""

    model_config = ConfigDict(extra="allow")

    post: dict[str, Any] | None = Field(default=None, description="`post_*` events: `id` read.")
    topic: dict[str, Any] | None = Field(default=None, description="`topic_*` events: `id`.")
    category: dict[str, Any] | None = Field(default=None, description="`category_*`: `id`.")
    ping: str | None = Field(default=None, description="`ping` events: \"OK\".")


class WebhookAnswer(ResponseModel):
    """What the sidecar did with a delivery."""

    status: Literal["applied", "duplicate", "ignored", "pong"]
    discourse_event: str
    event_id: str | None = None
    event: str | None = Field(default=None, description="The index event it became.")
    ids: int | None = None
    vectors_removed: int | None = None
    queued_posts: int | None = None
    job_ids: list[str] | None = None
    recheck_in_s: int | None = Field(
        default=None, description="It changed nothing: looked at again this much later.")


def check_signature(raw: bytes, header: str, secret: str) -> None:
    """Raise Unauthorized unless ``header`` is ``sha256=`` + the body's HMAC (constant time)."""
    expected = "sha256=" + hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
    if not header:
        raise Unauthorized("missing X-Discourse-Event-Signature: set the webhook's secret in "
                           "Discourse to SIDECAR_DISCOURSE_WEBHOOK_SECRET")
    if not hmac.compare_digest(header.strip().lower().encode(), expected.encode()):
        raise Unauthorized("X-Discourse-Event-Signature does not match the body")


def delivery_digest(event: str, raw: bytes) -> str:
    """What names a delivery: a digest of the index event it stands for and of its signed body
    (never of the unsigned event id, which a replay can change at will)."""
    return hashlib.sha256(event.encode() + b"\n" + raw).hexdigest()


def index_event(name: str, body: dict[str, Any]) -> tuple[str, list[int]] | None:
    """The index event and ids a Discourse event stands for, or None when it concerns no post."""
    kind = "post" if name in POST_EVENTS else name.partition("_")[0]
    if name not in POST_EVENTS and kind not in SCOPE_EVENTS:
        return None
    obj = body.get(kind)
    ident = obj.get("id") if isinstance(obj, dict) else None
    if isinstance(ident, bool) or not isinstance(ident, int) or not 0 < ident < 2**31:
        raise InvalidInput(f"a {name} delivery needs {{\"{kind}\": {{\"id\": <integer>}}}}")
    return POST_EVENTS.get(name) or SCOPE_EVENTS[kind], [ident]


@bp.post("/v1/discourse/webhook")
@documented(tag="index", auth="discourse", request=DiscourseDelivery, response=WebhookAnswer,
            status=202, also=(200,), errors=(400, 401, 404, 413, 415, 422),
            summary="Discourse's own webhook deliveries (post, topic, category events; ping). "
                    "Signed with the webhook's secret; 202 when applied, 200 for a ping, a "
                    "duplicate or an event that concerns no post; 404 while "
                    "SIDECAR_DISCOURSE_WEBHOOK_SECRET is unset.")
def discourse_webhook() -> ResponseReturnValue:
    """Check the signature, forget redeliveries, apply the index event."""
    res = get_resources()
    secret = res.settings.discourse_webhook_secret
    if secret is None:
        raise NotFound("Discourse webhooks are off: set SIDECAR_DISCOURSE_WEBHOOK_SECRET")
    if request.mimetype != "application/json":  # a form body is parsed away before this
        raise UnsupportedMediaType("set the webhook's content type to application/json")
    raw = request.get_data(cache=True)
    check_signature(raw, request.headers.get("X-Discourse-Event-Signature", ""),
                    secret.get_secret_value())
    try:
        body = json.loads(raw)
    except ValueError:
        raise BadRequest("the delivery's body is not JSON") from None
    if not isinstance(body, dict):
        raise InvalidInput("the delivery's body must be a JSON object")
    name = request.headers.get("X-Discourse-Event", "")
    event_id = request.headers.get("X-Discourse-Event-Id") or None
    answer: dict[str, Any] = {"discourse_event": name, "event_id": event_id}
    if name == "ping" or request.headers.get("X-Discourse-Event-Type") == "ping":
        return respond(WebhookAnswer, {"status": "pong", **answer})
    target = index_event(name, body)
    if target is None:
        return respond(WebhookAnswer, {"status": "ignored", **answer})
    # One Redis key per (index event, body): every API node sees it.
    digest = delivery_digest(target[0], raw)
    key = f"{res.settings.queue_prefix}:discourse-delivery:{digest}"
    if res.redis.exists(key):
        return respond(WebhookAnswer, {"status": "duplicate", **answer})
    outcome = apply_event(res, *target, hint=True)
    applied = IndexEventAccepted.of(outcome).model_dump()
    if outcome.changed:
        # Remembered once applied, never before: a delivery that failed, or whose process died
        # midway, is applied again when Discourse redelivers it.
        res.redis.set(key, "1", ex=DEDUP_TTL_S)
    else:
        applied["recheck_in_s"] = schedule_recheck(res, *target, digest)
    return respond(WebhookAnswer, {"status": "applied", **answer, **applied}, 202)
