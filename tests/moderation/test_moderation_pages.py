"""The moderator pages over HTTP (no browser): sessions, CSRF, escaping, errors as HTML."""

from __future__ import annotations

import re
from typing import Any

import psycopg
import pytest
from markupsafe import escape

from tests.conftest import API_KEY
from tests.moderation.conftest import BI, MODERATOR_KEY, add_retrieval

XSS = '<script>alert("x")</script>"><img src=x onerror=alert(1)><svg onload=alert(2)>'


def login(client: Any, key: str = MODERATOR_KEY, name: str = "alice", next_: str = "",
          headers: dict[str, str] | None = None) -> Any:
    """The login form read (its CSRF token and cookie), then posted, as a browser does."""
    form = client.get("/moderation/login", headers=headers or {})
    return client.post("/moderation/login", headers=headers or {},
                       data={"key": key, "name": name, "next": next_,
                             "csrf": login_csrf_of(form.get_data(as_text=True))})


def login_csrf_of(html: str) -> str:
    """The login form's own token (a logged-in page also has the logout form's)."""
    return csrf_of(html[html.index('action="/moderation/login"'):])


def csrf_of(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]+)"', html)
    assert m, html
    return m.group(1)


def test_pages_need_a_session(mod_client: Any) -> None:
    resp = mod_client.get("/moderation/?zone=abstain")
    assert resp.status_code == 303
    assert resp.headers["Location"].startswith("/moderation/login?next=")
    bare = mod_client.get("/moderation")  # typed without the slash
    assert bare.status_code == 303 and "/moderation/login" in bare.headers["Location"]
    assert mod_client.get("/moderation/calibration").status_code == 303
    # the API key is not a moderator session
    resp = mod_client.get("/moderation/", headers={"Authorization": f"Bearer {API_KEY}"})
    assert resp.status_code == 303
    post = mod_client.post("/moderation/retrievals/00000000-0000-0000-0000-000000000000/label",
                           data={"label": "correct_abstention"})
    assert post.status_code == 401 and "text/html" in post.content_type


def test_disabled_pages_say_so(disabled_app: Any) -> None:
    resp = disabled_app.test_client().get("/moderation/login")
    assert resp.status_code == 503
    assert "SIDECAR_MODERATOR_KEY" in resp.get_data(as_text=True)
    assert "text/html" in resp.content_type


def test_login_sets_a_strict_http_only_cookie(mod_client: Any) -> None:
    wrong = login(mod_client, key="nope")
    assert wrong.status_code == 401 and "wrong moderator key" in wrong.get_data(as_text=True)
    ok = login(mod_client, next_="/moderation/calibration")
    assert ok.status_code == 303 and ok.headers["Location"] == "/moderation/calibration"
    cookie = ok.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/moderation" in cookie
    assert MODERATOR_KEY not in cookie
    page = mod_client.get("/moderation/")
    assert page.status_code == 200 and "alice" in page.get_data(as_text=True)


@pytest.mark.parametrize("target", [
    "https://evil.example/", "//evil.example/moderation/", "/v1/moderation/retrievals",
    "/\\evil.example", "javascript:alert(1)", "/moderation\n/x",
])
def test_no_open_redirect_after_login(mod_client: Any, target: str) -> None:
    resp = login(mod_client, next_=target)
    assert resp.status_code == 303 and resp.headers["Location"] == "/moderation/"


def test_a_forged_or_foreign_cookie_is_no_session(mod_client: Any) -> None:
    mod_client.set_cookie("sidecar_moderator", "eyJuIjoiYWxpY2UiLCJjIjoieCJ9.forged.sig",
                          path="/moderation")
    assert mod_client.get("/moderation/").status_code == 303


def test_login_attempts_are_throttled(mod_client: Any) -> None:
    codes = [login(mod_client, key=f"guess{i}").status_code for i in range(11)]
    assert codes[:10] == [401] * 10 and codes[10] == 429
    # Past its limit the client is refused before its key is compared, the right one too.
    assert login(mod_client).status_code == 429


def test_security_headers(mod_client: Any) -> None:
    resp = mod_client.get("/moderation/login")
    csp = resp.headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp  # no script may run
    assert resp.headers["X-Frame-Options"] == "DENY"
    assert resp.headers["Cache-Control"] == "no-store"


def test_everything_from_users_is_escaped(mod_client: Any, clean_retrievals: str) -> None:
    rid = add_retrieval(clean_retrievals, zone="abstain", score=-5.0, query=XSS,
                        conversation=[{"role": "user", "content": XSS},
                                      {"role": "<b>assistant</b>", "content": "</td></tr>x"}])
    with psycopg.connect(clean_retrievals) as conn:
        conn.execute(
            "UPDATE sidecar.sidecar_retrievals"
            " SET evidence = jsonb_set(jsonb_set(evidence, '{0,url}',"
            " '\"javascript:alert(3)\"'), '{0,title}', to_jsonb(%s::text)) WHERE id = %s",
            (XSS, rid))
    login(mod_client)
    for url in ("/moderation/", f"/moderation/retrievals/{rid}"):
        html = mod_client.get(url).get_data(as_text=True)
        assert "<script>alert" not in html and "<img src=x" not in html
        assert "<svg onload" not in html and "<b>assistant" not in html
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    detail = mod_client.get(f"/moderation/retrievals/{rid}").get_data(as_text=True)
    assert 'href="javascript:' not in detail
    # a note is user input too
    csrf = csrf_of(detail)
    mod_client.post(f"/moderation/retrievals/{rid}/label",
                    data={"csrf": csrf, "label": "wrong_evidence", "note": XSS})
    detail = mod_client.get(f"/moderation/retrievals/{rid}").get_data(as_text=True)
    assert "<script>alert" not in detail and "&lt;svg onload=alert(2)&gt;" in detail


def test_each_item_says_which_score_decided(mod_client: Any, clean_retrievals: str) -> None:
    reason = ("bi-encoder score 0.41 < abstain threshold 0.52 (calibrated on 300 of this "
              "forum's own questions (2026-12-02))")
    rid = add_retrieval(clean_retrievals, zone="abstain", score=0.41, scorer=BI, reason=reason)
    gated = add_retrieval(clean_retrievals, zone="abstain", score=None, gate_reason="greeting")
    login(mod_client)
    listing = mod_client.get("/moderation/").get_data(as_text=True)
    assert str(escape(reason)) in listing and "gate: greeting" in listing
    detail = mod_client.get(f"/moderation/retrievals/{rid}").get_data(as_text=True)
    assert 'id="zone-reason"' in detail and str(escape(reason)) in detail
    gated_page = mod_client.get(f"/moderation/retrievals/{gated}").get_data(as_text=True)
    assert 'id="zone-reason"' not in gated_page  # the gate decided: no score, no threshold


def test_label_form_needs_the_csrf_token(mod_client: Any, clean_retrievals: str) -> None:
    rid = add_retrieval(clean_retrievals, zone="abstain", score=-5.0)
    login(mod_client)
    url = f"/moderation/retrievals/{rid}/label"
    for data in ({"label": "correct_abstention"},
                 {"label": "correct_abstention", "csrf": "not-the-token"}):
        resp = mod_client.post(url, data=data)
        assert resp.status_code == 401 and "stale" in resp.get_data(as_text=True)
    csrf = csrf_of(mod_client.get(f"/moderation/retrievals/{rid}").get_data(as_text=True))
    ok = mod_client.post(url, data={"csrf": csrf, "label": "should_have_answered",
                                    "right_topic_id": "27", "note": "the Caddy thread"})
    assert ok.status_code == 303
    assert ok.headers["Location"] == f"/moderation/retrievals/{rid}?saved=1"
    page = mod_client.get(ok.headers["Location"]).get_data(as_text=True)
    assert "Label saved." in page and "should_have_answered → topic 27" in page
    assert "by alice" in page


@pytest.mark.parametrize(("form", "message"), [
    ({"label": "should_have_answered", "right_topic_id": ""}, "needs right_topic_id"),
    ({"label": "should_have_answered", "right_topic_id": "abc"}, "valid integer"),
    ({"label": "should_have_answered", "right_topic_id": "999999"}, "not a public topic"),
    ({"label": "correct_abstention", "right_topic_id": "27"}, "takes no right_topic_id"),
    ({"label": "bogus"}, "label"),
])
def test_label_form_errors_are_shown_on_the_page(
    mod_client: Any, clean_retrievals: str, form: dict[str, str], message: str
) -> None:
    rid = add_retrieval(clean_retrievals, zone="cautious", score=-2.0)
    login(mod_client)
    csrf = csrf_of(mod_client.get(f"/moderation/retrievals/{rid}").get_data(as_text=True))
    resp = mod_client.post(f"/moderation/retrievals/{rid}/label",
                           data={"csrf": csrf, "note": "kept", **form})
    html = resp.get_data(as_text=True)
    assert resp.status_code == 422 and message in html
    assert ">kept</textarea>" in html  # what the moderator typed is still there
    with psycopg.connect(clean_retrievals) as conn:
        assert conn.execute("SELECT count(*) FROM sidecar.sidecar_retrieval_labels"
                            ).fetchone()[0] == 0


def test_errors_are_html_pages(mod_client: Any) -> None:
    login(mod_client)
    for url, status in (("/moderation/retrievals/nope", 404),
                        ("/moderation/retrievals/00000000-0000-0000-0000-000000000000", 404),
                        ("/moderation/?zone=elsewhere", 422), ("/moderation/?page=0", 422),
                        ("/moderation/?outcome=maybe", 422), ("/moderation/gaps?days=0", 422)):
        resp = mod_client.get(url)
        assert resp.status_code == status, url
        assert "text/html" in resp.content_type


def test_logout(mod_client: Any) -> None:
    login(mod_client)
    page = mod_client.get("/moderation/").get_data(as_text=True)
    assert mod_client.post("/moderation/logout", data={}).status_code == 401  # no token
    resp = mod_client.post("/moderation/logout", data={"csrf": csrf_of(page)})
    assert resp.status_code == 303
    assert mod_client.get("/moderation/").status_code == 303


def test_calibration_page_charts_the_forums_own_zones(
    mod_client: Any, mod_state: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from sidecar.core.answerability import calibrate

    scorer = f"bi-encoder:{mod_state.model.name}"
    zones = calibrate([i / 100 for i in range(30, 90)], scorer=scorer,
                      created_at="2026-12-02T00:00:00+00:00")
    service = mod_state.moderation()
    monkeypatch.setattr(service, "zones", {scorer: zones})
    login(mod_client, next_="/moderation/calibration")
    page = mod_client.get("/moderation/calibration").get_data(as_text=True)
    assert scorer in page
    assert "calibrated on 60 of this forum" in page and f"{zones.normal:.4f}" in page
    svg = page[page.index("<svg"):page.index("</svg>")]
    for part in ("curve-calibration", "threshold-abstain", "threshold-normal"):
        assert part in svg
    assert "<script" not in page
    # The labels' report judges the scorer by the thresholds it is served.
    assert service.thresholds(service_kind(scorer), scorer).normal == zones.normal
    assert "members' questions" not in page
    # Read from the members' questions, the page says which threshold came from where.
    members = calibrate([i / 100 for i in range(30, 90)], scorer=scorer,
                        created_at="2026-12-02T00:00:00+00:00",
                        asked=[i / 100 for i in range(20, 60)])
    monkeypatch.setattr(service, "zones", {scorer: members})
    page = mod_client.get("/moderation/calibration").get_data(as_text=True)
    assert "calibrated on 40 questions this forum" in page
    assert "normal at the 80th of the members' questions" in page
    assert f"{members.normal:.4f}" in page


def test_calibration_page_shows_a_calibration_waiting_for_approval(
    mod_client: Any, mod_state: Any
) -> None:
    """`sidecar calibrate` left a calibration that moved past its bound: not served, shown
    with why and how to approve it (read anew: the API was not reloaded)."""
    from sidecar.core.answerability import calibrate
    from sidecar.search.profile import with_pending, write_profile

    settings = mod_state.settings
    scorer = f"bi-encoder:{mod_state.model.name}"
    moved = calibrate([i / 100 for i in range(30, 90)], scorer=scorer, seed=1234,
                      created_at="2026-12-06T05:00:00+00:00",
                      asked=[0.36 + i / 1000 for i in range(40)])
    problem = "the normal threshold would move from 0.7720 to 0.3900: 52 points <b>"
    path = settings.profile_path()
    write_profile(path, with_pending(path, moved, [problem], model=mod_state.model.name,
                                     strategy=settings.strategy, settings=settings))
    try:
        login(mod_client, next_="/moderation/calibration")
        page = mod_client.get("/moderation/calibration").get_data(as_text=True)
        assert f"Waiting for approval: {scorer}" in page and "seed 1234" in page
        assert f"{moved.normal:.4f}" in page and "sidecar calibrate --approve" in page
        assert str(escape(problem)) in page and "<b>" not in page
        assert mod_state.moderation().zones.get(scorer) is None  # not served
    finally:
        path.unlink(missing_ok=True)


def service_kind(scorer: str) -> Any:
    from sidecar.core.calibration import scorer_kind

    return scorer_kind(scorer)
