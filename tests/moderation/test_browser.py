"""The moderator pages in a real browser: Debian's Chromium, headless, JavaScript turned off.

The app is served by a real HTTP server (werkzeug) in a thread. The moderator logs in, lists,
filters, opens a retrieval, labels it, sees the label in the list, and watches the calibration
report change. A conversation carrying script tags must show as text and never run (a dialog
would fail the test, and JavaScript is off anyway: the pages must not need it).
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.moderation.conftest import BI, MODERATOR_KEY, add_retrieval

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(),
                       reason="Debian's chromium is not installed (apt-get install -y chromium)"),
]


@pytest.fixture
def server(mod_app: Any) -> Iterator[str]:
    """The app on a free local port."""
    from werkzeug.serving import make_server

    srv = make_server("127.0.0.1", 0, mod_app, threaded=True)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.server_port}"
    srv.shutdown()
    thread.join(timeout=10)


@pytest.fixture
def page(server: str) -> Iterator[Any]:
    """A page in a fresh headless Chromium context without JavaScript."""
    sync_api = pytest.importorskip("playwright.sync_api")
    assert shutil.which(str(CHROMIUM))
    with sync_api.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        context = browser.new_context(java_script_enabled=False, base_url=server)
        context.set_default_timeout(15_000)
        pg = context.new_page()
        dialogs: list[str] = []
        pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        yield pg
        assert dialogs == [], f"a script ran: {dialogs}"
        context.close()
        browser.close()


def rows(page: Any) -> list[str]:
    return [r.inner_text() for r in page.locator("#retrievals tbody tr").all()]


def test_moderator_reviews_labels_and_calibrates(page: Any, clean_retrievals: str) -> None:
    now = datetime.now(UTC)
    scores = {"abstain": [-7.0, -6.0, -5.5, -5.0], "cautious": [-3.0, -1.0]}
    ids = {}
    for zone, values in scores.items():
        for i, s in enumerate(values):
            ids[s] = add_retrieval(clean_retrievals, zone=zone, score=s,
                                   query=f"question {zone} {s}",
                                   created_at=now - timedelta(minutes=10 * (i + 1)))
    add_retrieval(clean_retrievals, zone="cautious", score=0.4, scorer=BI,
                  query="bi-encoder question", created_at=now - timedelta(hours=3))
    add_retrieval(clean_retrievals, zone="abstain", score=-6.5, query="<script>alert(1)</script>",
                  conversation=[{"role": "user", "content": "<img src=x onerror=alert(1)>"}],
                  created_at=now - timedelta(hours=4))

    # -- login ------------------------------------------------------------------------------
    page.goto("/moderation/?zone=abstain")
    assert "/moderation/login" in page.url
    page.fill("input[name=key]", "wrong")
    page.click("button[type=submit]")
    assert "wrong moderator key" in page.inner_text("main")
    page.fill("input[name=key]", MODERATOR_KEY)
    page.fill("input[name=name]", "Claire")
    page.click("button[type=submit]")
    assert page.url.endswith("/moderation/?zone=abstain")  # back where she was going
    assert "Claire" in page.inner_text("header")

    # -- list and filters ---------------------------------------------------------------------
    page.goto("/moderation/")
    assert len(rows(page)) == 8
    assert page.inner_text("#count-unlabelled") == "8"
    assert "<script>alert(1)</script>" in page.inner_text("#retrievals")  # shown, not run
    page.select_option("select[name=zone]", "cautious")
    page.click("form.filters button[type=submit]")
    assert "zone=cautious" in page.url
    assert len(rows(page)) == 3 and all("cautious" in r for r in rows(page))
    page.select_option("select[name=scorer]", BI)
    page.click("form.filters button[type=submit]")
    assert len(rows(page)) == 1 and "bi-encoder question" in rows(page)[0]
    page.goto("/moderation/")
    page.fill("input[name=q]", "abstain -5.5")
    page.click("form.filters button[type=submit]")
    assert len(rows(page)) == 1

    # -- calibration before any label ---------------------------------------------------------
    page.goto("/moderation/calibration")
    assert page.locator("#no-labels").is_visible()

    # -- open one, label it ---------------------------------------------------------------------
    def label(score: float, verdict: str, topic: str = "") -> None:
        page.goto("/moderation/")
        query = f"question {'abstain' if score < -4 else 'cautious'} {score}"
        page.fill("input[name=q]", query)
        page.click("form.filters button[type=submit]")
        page.click("#retrievals tbody tr >> a")
        assert page.inner_text("#query") == query
        page.check(f"input[name=label][value={verdict}]")
        page.fill("input[name=right_topic_id]", topic)
        page.click("form.label-form button[type=submit]")
        assert page.locator("#saved").is_visible(), page.inner_text("main")

    label(-7.0, "correct_abstention")
    assert "correct_abstention" in page.inner_text("#current-label")
    page.goto("/moderation/?labelled=yes")
    assert len(rows(page)) == 1 and "correct_abstention" in rows(page)[0]
    assert page.inner_text("#count-labelled") == "1"

    # a wrong topic is refused on the page, with the reason
    page.goto(f"/moderation/retrievals/{ids[-5.0]}")
    page.check("input[name=label][value=should_have_answered]")
    page.fill("input[name=right_topic_id]", "999999")
    page.click("form.label-form button[type=submit]")
    assert "not a public topic" in page.inner_text("#errors")

    page.goto("/moderation/calibration")
    first = page.locator("section.scorer").first
    assert first.locator(".n-correct").inner_text() == "1"
    assert first.locator("tr.boundary-abstain td.suggested").inner_text() == "—"
    assert first.locator(".changed").inner_text() == "0"

    # -- more labels: the report moves --------------------------------------------------------
    label(-6.0, "correct_abstention")
    label(-5.0, "should_have_answered", "27")
    label(-5.5, "should_have_answered", "36")
    page.goto("/moderation/?labelled=yes")
    labels = " ".join(rows(page))
    assert "should_have_answered → topic 27" in labels and len(rows(page)) == 4

    page.goto("/moderation/calibration")
    report = page.locator("section.scorer").first
    assert report.locator(".n-correct").inner_text() == "2"
    assert report.locator(".n-should").inner_text() == "2"
    assert report.locator("tr.boundary-abstain td.suggested").inner_text() == "-5.75"
    assert int(report.locator(".changed").inner_text()) > 0

    # -- logout ---------------------------------------------------------------------------------
    page.click("header button[type=submit]")
    assert "/moderation/login" in page.url
    page.goto("/moderation/")
    assert "/moderation/login" in page.url
