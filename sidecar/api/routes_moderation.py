"""The moderator review pages (server-rendered HTML); their JSON API is
:mod:`sidecar.api.routes_moderation_api`.

Both live under the ``moderation`` blueprint, whose endpoints skip the API-key check
(``sidecar.api.app``): they authenticate with the moderator key instead. The pages use a signed,
HttpOnly, SameSite=Strict session cookie obtained through a login form and a CSRF token in every
form (the login form's own, paired with a cookie: a login posted from another site is refused
before its key is read, so it is never counted as a guess), and work without JavaScript (the
Content-Security-Policy forbids scripts altogether); the API takes ``Authorization: Bearer
<SIDECAR_MODERATOR_KEY>`` (a request without it is refused, never counted as a guess). Errors on
the pages are HTML pages, errors of the API are the usual JSON.
"""

from __future__ import annotations

import logging
from typing import Any, get_args
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    Response,
    g,
    make_response,
    redirect,
    render_template,
    request,
    url_for,
)
from flask.typing import ResponseReturnValue
from pydantic import ValidationError
from werkzeug.exceptions import HTTPException

from sidecar.api.errors import validation_details
from sidecar.api.routes_moderation_api import (
    DISABLED,
    api,
    client_address,
    configured_zones,
    moderation_service,
    moderator_auth,
)
from sidecar.core.calibration import LABELS
from sidecar.errors import SidecarError, Unauthorized
from sidecar.moderation.auth import (
    LOGIN_COOKIE,
    LOGIN_MAX_AGE_S,
    SESSION_COOKIE,
    SESSION_MAX_AGE_S,
    Attempt,
    ModeratorAuth,
    Session,
)
from sidecar.moderation.models import AskOutcome, GapQuery, LabelRequest, ReviewFilters
from sidecar.moderation.service import parse_id

log = logging.getLogger(__name__)

bp = Blueprint("moderation", __name__)
pages = Blueprint("pages", __name__, template_folder="templates", url_prefix="/moderation")


OUTCOMES: tuple[str, ...] = get_args(AskOutcome)
_OPEN_PAGES = frozenset({"moderation.pages.login", "moderation.pages.login_post"})
_CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'none'; form-action 'self'; "
        "frame-ancestors 'none'; base-uri 'none'")


@pages.before_request
def _page_session() -> ResponseReturnValue | None:
    auth = moderator_auth()
    if not auth.enabled:
        return _page("moderation_error.html", 503, title="Moderation disabled", message=DISABLED)
    g.moderator = auth.read(request.cookies.get(SESSION_COOKIE))
    if g.moderator is None and request.endpoint not in _OPEN_PAGES:
        if request.method == "GET":
            return redirect(url_for("moderation.pages.login", next=request.full_path), 303)
        return _page("moderation_error.html", 401, title="Not logged in",
                     message="your session has expired: log in again")
    return None


@pages.after_request
def _headers(response: Response) -> Response:
    response.headers["Content-Security-Policy"] = _CSP
    response.headers["X-Content-Type-Options"] = "nosniff"
    response.headers["X-Frame-Options"] = "DENY"
    response.headers["Referrer-Policy"] = "no-referrer"
    response.headers["Cache-Control"] = "no-store"
    return response


def _page(template: str, status: int = 200, **context: Any) -> ResponseReturnValue:
    context.setdefault("moderator", g.get("moderator"))
    return render_template(template, **context), status


def _safe_next(target: str | None) -> str:
    """Only a path of these pages: never another host or scheme (no open redirect)."""
    default = url_for("moderation.pages.review")
    if not target or "\\" in target or any(ord(c) < 0x20 for c in target):
        return default
    parts = urlsplit(target)
    if parts.scheme or parts.netloc or not parts.path.startswith("/moderation/"):
        return default
    return target


def _https() -> bool:
    # X-Forwarded-Proto counts only through the SIDECAR_PROXY_HOPS trusted proxies (ProxyFix).
    return request.is_secure


def _login_page(status: int = 200, **context: Any) -> ResponseReturnValue:
    """The login form with its CSRF token, the same in the form and in its cookie."""
    token = ModeratorAuth.login_token(request.cookies.get(LOGIN_COOKIE))
    response = make_response(render_template("moderation_login.html", csrf=token,
                                             moderator=g.get("moderator"), **context), status)
    response.set_cookie(LOGIN_COOKIE, token, max_age=LOGIN_MAX_AGE_S, httponly=True,
                        samesite="Strict", secure=_https(), path="/moderation")
    return response


@pages.get("/login")
def login() -> ResponseReturnValue:
    """The login form."""
    return _login_page(next=_safe_next(request.args.get("next")))


@pages.post("/login")
def login_post() -> ResponseReturnValue:
    """Check the key; on success set the session cookie and go where the moderator was going.

    A form without its CSRF token (posted from another site) and an empty key are refused
    before the key is read: neither counts as a wrong guess.
    """
    auth = moderator_auth()
    target = _safe_next(request.form.get("next"))
    if not ModeratorAuth.login_csrf_ok(request.cookies.get(LOGIN_COOKIE),
                                       request.form.get("csrf")):
        return _login_page(403, next=target,
                           error="the form is stale or did not come from these pages: "
                                 "enter the key again")
    outcome = auth.attempt(client_address(), request.form.get("key"))
    if outcome is Attempt.THROTTLED:  # past its limit, this client's key is not compared
        return _login_page(429, next=target, error="too many failed attempts; wait a few minutes")
    if outcome is Attempt.MISSING:
        return _login_page(401, next=target, error="enter the moderator key")
    if outcome is Attempt.WRONG:
        return _login_page(401, next=target, error="wrong moderator key")
    cookie, _session = auth.issue(request.form.get("name", ""))
    response = redirect(target, 303)
    response.set_cookie(SESSION_COOKIE, cookie, max_age=SESSION_MAX_AGE_S, httponly=True,
                        samesite="Strict", secure=_https(), path="/moderation")
    response.delete_cookie(LOGIN_COOKIE, path="/moderation")
    return response


def _session() -> Session:
    session: Session = g.moderator
    return session


def _check_csrf() -> None:
    if not ModeratorAuth.csrf_ok(_session(), request.form.get("csrf")):
        raise Unauthorized("the form is stale or did not come from these pages: reload it")


@pages.post("/logout")
def logout() -> ResponseReturnValue:
    """End the session on the server (a copy of the cookie stops working too)."""
    _check_csrf()
    moderator_auth().end(_session())
    response = redirect(url_for("moderation.pages.login"), 303)
    response.delete_cookie(SESSION_COOKIE, path="/moderation")
    return response


@pages.get("/", strict_slashes=False)  # "/moderation" too, not a JSON 401 for a typed URL
def review() -> ResponseReturnValue:
    """The review list with its filters."""
    filters = ReviewFilters.from_args(request.args.to_dict())
    service = moderation_service()
    counts, scorers, outcomes = service.overview()
    return _page("moderation_list.html", page=service.review(filters), filters=filters,
                 counts=counts, scorers=scorers, labels=LABELS, outcomes=outcomes,
                 outcome_names=OUTCOMES)


@pages.get("/gaps")
def gaps() -> ResponseReturnValue:
    """The content gaps: unanswered questions grouped by subject."""
    query = GapQuery.from_args(request.args.to_dict())
    return _page("moderation_gaps.html", report=moderation_service().gaps(query), query=query)


def _detail(retrieval_id: str, status: int = 200, **extra: Any) -> ResponseReturnValue:
    item = moderation_service().detail(parse_id(retrieval_id))
    return _page("moderation_detail.html", status, item=item, labels=LABELS,
                 saved=request.args.get("saved") == "1", **extra)


@pages.get("/retrievals/<retrieval_id>")
def detail(retrieval_id: str) -> ResponseReturnValue:
    """One retrieval and its label form."""
    return _detail(retrieval_id)


@pages.post("/retrievals/<retrieval_id>/label")
def label(retrieval_id: str) -> ResponseReturnValue:
    """Store the form's label, then show the retrieval again (POST, redirect, GET)."""
    _check_csrf()
    rid = parse_id(retrieval_id)
    form = {k: request.form.get(k, "") for k in ("label", "right_topic_id", "note")}
    try:
        body = LabelRequest.model_validate({
            "label": form["label"], "note": form["note"],
            "right_topic_id": form["right_topic_id"].strip() or None,
            "moderator": _session().name,
        })
        moderation_service().label(rid, body)
    except ValidationError as exc:
        errors = [f"{d['loc']}: {d['msg']}" for d in validation_details(exc)]
        return _detail(retrieval_id, 422, errors=errors, form=form)
    except SidecarError as exc:
        if exc.status != 422:
            raise
        return _detail(retrieval_id, 422, errors=[exc.message], form=form)
    return redirect(url_for("moderation.pages.detail", retrieval_id=str(rid), saved="1"), 303)


@pages.get("/calibration")
def calibration() -> ResponseReturnValue:
    """The calibration report."""
    service = moderation_service()
    return _page("moderation_calibration.html", charts=service.calibration_charts(),
                 zones=service.zones, pending=service.pending(), configured=configured_zones())


@pages.app_template_filter("moderation_href")
def _href(url: object) -> str | None:
    """A link target fit for an href: http(s) or a site path, else None (shown as text)."""
    text = str(url or "")
    parts = urlsplit(text)
    if parts.scheme in {"http", "https"} and parts.netloc:
        return text
    if text.startswith("/") and not text.startswith("//") and "\\" not in text:
        return text
    return None


@pages.errorhandler(SidecarError)
def _page_domain_error(exc: SidecarError) -> ResponseReturnValue:
    return _page("moderation_error.html", exc.status, title=exc.code.replace("_", " "),
                 message=exc.message)


@pages.errorhandler(ValidationError)
def _page_validation_error(exc: ValidationError) -> ResponseReturnValue:
    details = [f"{d['loc']}: {d['msg']}" for d in validation_details(exc)]
    return _page("moderation_error.html", 422, title="Invalid request",
                 message="; ".join(details))


@pages.errorhandler(HTTPException)
def _page_http_error(exc: HTTPException) -> ResponseReturnValue:
    return _page("moderation_error.html", exc.code or 500, title=exc.name,
                 message=exc.description or "")


@pages.errorhandler(Exception)
def _page_unexpected(exc: Exception) -> ResponseReturnValue:
    log.exception("moderation page failed")
    return _page("moderation_error.html", 500, title="Internal error",
                 message="something went wrong; see the sidecar's log")


bp.register_blueprint(pages)
bp.register_blueprint(api)
