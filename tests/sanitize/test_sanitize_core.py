"""The pure sanitizer: citation rewriting, footer, locales, forum-link rules, and properties."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.core.forum_links import ForumSite, ForumTarget, find_urlish, resolve_forum_target
from sidecar.core.sanitize import MAX_REMOVALS, EvidenceRef, LinkedPost, sanitize_answer
from sidecar.core.sanitize_messages import pick_locale
from tests.sanitize.checker import audit, discourse_mentions

SITE = ForumSite.parse("https://forum.example.org")


def post(pid: int, topic: int, number: int, title: str = "", base: str = "https://forum.example.org"
         ) -> LinkedPost:
    return LinkedPost(pid, topic, number, title or f"Topic {topic}",
                      f"{base}/t/slug-{topic}/{topic}/{number}", f"{base}/t/slug-{topic}/{topic}")


EVIDENCE = [
    EvidenceRef(1, post(11, 1, 1, "Caddy or Traefik?")),
    EvidenceRef(2, post(22, 2, 3, "ZFS scrub errors"), (post(23, 2, 4),)),
    EvidenceRef(3, post(33, 3, 1, "Now private")),
]
PUBLIC = frozenset({11, 22, 23})
ALLOWED = {u for ref in EVIDENCE for p in (ref.post, *ref.neighbours) if p.post_id in PUBLIC
           for u in (p.url, p.topic_url)}


def run(text: str, locale: str = "en", evidence: list[EvidenceRef] = EVIDENCE,
        public: frozenset[int] = PUBLIC, site: ForumSite = SITE):  # type: ignore[no-untyped-def]
    return sanitize_answer(text, evidence, public, site, locale)  # type: ignore[arg-type]


def body(text: str) -> str:
    """The answer without its footer."""
    return text.split("\n\n---\n")[0].split("\n\n*")[0]


@pytest.mark.parametrize(("marker", "expected"), [
    ("[[1]]", "[1](https://forum.example.org/t/slug-1/1/1)"),
    ("[[ 2 ]]", "[2](https://forum.example.org/t/slug-2/2/3)"),
    ("[[1, 2]]", "[1](https://forum.example.org/t/slug-1/1/1), "
                 "[2](https://forum.example.org/t/slug-2/2/3)"),
    ("[[2,1]]", "[2](https://forum.example.org/t/slug-2/2/3), "
                "[1](https://forum.example.org/t/slug-1/1/1)"),
    ("[[1, 1, 2, 1]]", "[1](https://forum.example.org/t/slug-1/1/1), "
                       "[2](https://forum.example.org/t/slug-2/2/3)"),
])
def test_citation_markers_become_post_links(marker: str, expected: str) -> None:
    result = run(f"Use Caddy {marker}.")
    assert body(result.text) == f"Use Caddy {expected}."
    assert not result.strict_mode


def test_citations_are_deduplicated_and_listed_in_order() -> None:
    result = run("A [[2]]. B [[1, 2]]. C [[2]].")
    assert [c.n for c in result.citations] == [1, 2]
    assert [(c.post_id, c.topic_id) for c in result.citations] == [(11, 1), (22, 2)]
    assert result.text.count("(https://forum.example.org/t/slug-2/2/3)") == 4  # 3 + Sources
    assert result.removed == []


def test_unknown_and_private_citations_are_dropped_and_reported() -> None:
    result = run("Fine [[1]], gone [[3]], unknown [[7]] and [[0, 2]].")
    assert body(result.text) == ("Fine [1](https://forum.example.org/t/slug-1/1/1), gone, "
                                 "unknown and [2](https://forum.example.org/t/slug-2/2/3).")
    assert [(r.kind, r.value) for r in result.removed] == [
        ("citation", "[[3]]"), ("citation", "[[7]]"), ("citation", "[[0]]")]
    assert "no longer public" in result.removed[0].reason
    assert "not in this retrieval's evidence (1-3)" in result.removed[1].reason
    assert "33" not in result.removed[0].reason  # not even the id of a private post


@pytest.mark.parametrize(("locale", "sources", "cta"), [
    ("en", "**Sources**", "Read the full discussions on the forum"),
    ("fr", "**Sources**", "Retrouvez les discussions complètes sur le forum"),
])
def test_footer_lists_sources_and_a_call_to_action(locale: str, sources: str, cta: str) -> None:
    result = run("Answer [[2]] and [[1]].", locale)
    footer = result.text.split("\n\n---\n\n", 1)[1]
    assert footer.startswith(sources)
    lines = [line for line in footer.splitlines() if line.startswith("- ")]
    assert lines == ["- \\[1\\] [Caddy or Traefik?](https://forum.example.org/t/slug-1/1/1)",
                     "- \\[2\\] [ZFS scrub errors](https://forum.example.org/t/slug-2/2/3)"]
    assert cta in footer


@pytest.mark.parametrize(("locale", "cta"), [
    ("en", "No forum discussion is cited in this answer"),
    ("fr", "Aucune discussion du forum n'est citée dans cette réponse"),
])
def test_without_citation_there_is_no_sources_list_but_still_a_call_to_action(
    locale: str, cta: str
) -> None:
    result = run("I could not find it on the forum [[7]].", locale)
    assert "Sources" not in result.text and "---" not in result.text
    assert result.text.endswith(f"*{cta}" + result.text.split(cta, 1)[1])
    assert result.citations == []


@pytest.mark.parametrize(("requested", "default", "expected"), [
    ("fr", "en", "fr"), ("fr-FR", "en", "fr"), ("fr_CA", "en", "fr"), ("EN-gb", "fr", "en"),
    (None, "fr", "fr"), ("de", "fr", "fr"), ("", "en", "en"), ("xx", "yy", "en"),
])
def test_locale_of_the_retrieval_else_the_forum(requested: str | None, default: str,
                                                expected: str) -> None:
    assert pick_locale(requested, default) == expected


def test_titles_in_the_footer_are_sanitized_too() -> None:
    title = 'Guide <img src=x onerror=alert(1)> [x](http://evil.example) www.evil.example'
    evil = [EvidenceRef(1, post(11, 1, 1, title))]
    result = run("See [[1]].", evidence=evil)
    assert audit(result.text, {evil[0].post.url, evil[0].post.topic_url}) == []
    assert "Guide" in result.text and "onerror" not in result.text
    assert result.citations[0].title == evil[0].post.title  # JSON carries the title as stored


def test_forum_links_into_the_evidence_are_kept_in_canonical_form() -> None:
    result = run("[reply](HTTPS://Forum.Example.org:443/t/old-slug/2/4?u=bob#post_4) and "
                 "[topic](/t/1) and https://forum.example.org/t/x/2/3 .")
    assert body(result.text) == (
        "[reply](https://forum.example.org/t/slug-2/2/4) and "
        "[topic](https://forum.example.org/t/slug-1/1) and "
        "<https://forum.example.org/t/slug-2/2/3> .")
    assert result.removed == []


def test_relative_forum_links_when_no_forum_url() -> None:
    relative = [EvidenceRef(1, post(11, 1, 1, base=""))]
    site = ForumSite.parse("")
    result = run("[a](/t/x/1/1) [b](https://forum.example.org/t/x/1/1) [[1]]",
                 evidence=relative, public=frozenset({11}), site=site)
    assert body(result.text) == "[a](/t/slug-1/1/1) b [1](/t/slug-1/1/1)"
    assert result.removed[0].reason == "not a relative /t/ link into the forum"


def test_forum_in_a_sub_folder() -> None:
    site = ForumSite.parse("https://example.org/forum/")
    evidence = [EvidenceRef(1, post(11, 1, 1, base="https://example.org/forum"))]
    result = run("[a](/forum/t/x/1/1) [b](/t/x/1/1) [c](https://example.org/t/x/1/1)",
                 evidence=evidence, public=frozenset({11}), site=site)
    assert body(result.text) == "[a](https://example.org/forum/t/slug-1/1/1) b c"


@pytest.mark.parametrize(("destination", "target"), [
    ("https://forum.example.org/t/slug/27/4", ForumTarget(27, 4)),
    ("/t/slug/27", ForumTarget(27)),
    ("/t/27/4", ForumTarget(27, 4)),
    ("/t/27", ForumTarget(27)),
    ("//forum.example.org/t/a/9", ForumTarget(9)),
    ("https://forum.example.org./t/a/9/2", ForumTarget(9, 2)),  # trailing dot: same host
    ("https://\uff46\uff4f\uff52\uff55\uff4d.example.org/t/a/9", ForumTarget(9)),  # fullwidth
    ("https://forum.example.org/%74/a/9", ForumTarget(9)),  # %74 is "t"
    ("https://forum.example.org@evil.example/t/a/9", None),
    ("https://evil.example#@forum.example.org/t/a/9", None),
    ("https://f\u043erum.example.org/t/a/9", None),  # Cyrillic o
    ("https://forum.example.org.evil.example/t/a/9", None),
    ("https://forum.example.org:8080/t/a/9", None),
    ("https:forum.example.org/t/a/9", None),
    ("ftp://forum.example.org/t/a/9", None),
    ("/u/admin", None),
    ("t/a/9", None),
    ("/t/../admin/9", None),
    ("/t/a/9/2/3", None),
    ("/t/a/\u0661\u0662", None),  # Arabic-Indic digits are not a topic id
    ("/t/a /9", None),
    ("/t/a/9\\@evil.example", None),
])
def test_what_counts_as_a_forum_link(destination: str, target: ForumTarget | None) -> None:
    assert resolve_forum_target(destination, SITE) == target


@pytest.mark.parametrize(("text", "found"), [
    ("see http://evil.example/x.", ["http://evil.example/x"]),
    ("(https://a.example/b_(c))", ["https://a.example/b_(c)"]),
    ("evil.com and README.md and docker-compose.yml", ["evil.com"]),
    ("_evil.com_ *evil.com* ~~evil.com~~", ["evil.com", "evil.com", "evil.com"]),
    ("mail me@evil.com", ["me@evil.com"]),
    ("ghcr.io/home-assistant/core:stable", ["ghcr.io/home-assistant/core:stable"]),
    ("nginx:alpine, /etc/nginx/conf.d/x.conf, 192.168.1.2:8123, C:\\Users", []),
    ("the data: it shows; metadata:x; hotel:5", []),
    ("\uff48\uff54\uff54\uff50://evil.example", ["\uff48\uff54\uff54\uff50://evil.example"]),
    ("javascript:alert(1) and JAVASCRIPT: x", ["javascript:alert(1)", "JAVASCRIPT: x"]),
])
def test_what_counts_as_url_like_text(text: str, found: list[str]) -> None:
    assert [text[a:b] for a, b in find_urlish(text)] == found


def test_markdown_formatting_and_code_survive() -> None:
    text = ("## Steps\n\n1. **Install** `docker compose` with `ports: [\"80:80\"]`\n"
            "2. Edit *Caddyfile* [[1]]\n\n| a | b |\n|---|---|\n| x | y |\n\n"
            "```yaml\nservices:\n  web:\n    ports: [\"8080:80\"]  # <not a tag>\n```\n\n"
            "> quoted\n")
    result = run(text)
    assert not result.strict_mode and result.removed == []
    out = body(result.text)
    assert "```yaml\nservices:\n  web:\n    ports: [\"8080:80\"]  # <not a tag>\n```" in out
    assert '`ports: ["80:80"]`' in out and "**Install**" in out and "> quoted" in out
    assert "| a | b |" in out


def test_many_removals_are_capped() -> None:
    result = run(" ".join(f"[x{i}](https://evil.example/{i})" for i in range(MAX_REMOVALS + 20)))
    assert len(result.removed) == MAX_REMOVALS + 1
    assert result.removed[-1].reason == "20 more removals not listed"
    assert "evil" not in result.text


def test_when_the_first_pass_fails_its_check_the_strict_pass_runs() -> None:
    # An HTML block opened by a comment on its own line beats the code span the first pass saw:
    # the renderer would show raw HTML, so the strict pass (no code kept) answers.
    text = "|_`forum.example.org_*<!--\n<!---->```*`_\n/t/s/27/4*"
    result = run(text)
    assert result.strict_mode
    assert audit(result.text, ALLOWED) == []


# -- mentions and hashtags (Discourse would notify users and groups, or print a category) ---------
@pytest.mark.parametrize("text", [
    "Ask @admins or @moderators.", "@staff can help", "cc: @alice, @bob.smith and @x",
    "Post it in #staff or #some-category, or #category:sub, or tag it #tag::tag.",
    "#staff at the start of a line", "**@admins** and *#staff*", "(@admins) [#staff]",
    "\\@admins and \\#staff", "&#64;admins and &#35;staff", "@&#97;dmins and #\\-staff",
    "Thanks @admins! See #42.", "line one\n@admins\n#staff", "- @admins\n- #staff",
    "| who | where |\n|---|---|\n| @admins | #staff |", "> @admins said #staff",
    "@\u00e9lodie et #caf\u00e9", "[[1]]@admins #staff[[2]]",
])
def test_mentions_and_hashtags_are_made_inert(text: str) -> None:
    assert discourse_mentions(text), "the case must be live before sanitizing"
    result = run(text)
    assert discourse_mentions(result.text) == []
    assert audit(result.text, ALLOWED) == []
    # Read the same: only invisible joiners were added.
    visible = result.text.replace("\u200c", "")
    for word in ("admins", "staff", "some-category", "alice", "\u00e9lodie"):
        if word in text:
            assert word in visible


def test_what_is_not_a_mention_is_left_alone() -> None:
    text = ("Mail alice@example.org, or see issue#12. Code `@admins` stays code.\n\n"
            "```python\n@decorator\ndef f(): pass  # comment\n```\n\n## Steps\n")
    result = run(text)
    out = body(result.text)
    assert "`@admins`" in out and "@decorator\ndef f(): pass  # comment" in out
    assert "## Steps" in out and "issue#12" in out
    assert discourse_mentions(result.text) == []


# -- properties ------------------------------------------------------------------------------------
FRAGMENTS = [
    "[", "]", "(", ")", "<", ">", "!", "`", "``", "```", "~~~", "\\", "\n", "\n\n", " ", "x",
    "&#106;", "&lt;", "&amp;", "&#x3a;", "javascript:", "http://", "https://", "//", "@", ".",
    ":", "/", '"', "'", "_", "*", "#", "|", "%2e", "    ", "> ", "- ", "1. ", "evil.example",
    "evil.com", "forum.example.org", "/t/slug-1/1/1", "/t/x/3/1", "<a href=", "<script>",
    "</script>", "<!--", "-->", "<img src=x onerror=alert(1)>", "<svg>", "[[1]]", "[[2, 3]]",
    "[[ 9 ]]", "www.", "data:", "\uff48\uff54\uff54\uff50", "\uff1a\uff0f\uff0f", "\u200b",
    "\u202e", "[ref]: ", "[ref]", "README.md", "<http://a.com>", "<a@b.com>", "\\[", "\\`",
    "@admins", "#staff", "#cat:sub", "&#64;", "\\@", "\\#", "a", "é",
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40))
def test_property_no_foreign_link_from_dangerous_fragments(parts: list[str]) -> None:
    result = run("".join(parts))
    assert audit(result.text, ALLOWED) == []
    assert {c.post_id for c in result.citations} <= PUBLIC


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_property_no_foreign_link_from_any_text(text: str) -> None:
    result = run(text)
    assert audit(result.text, ALLOWED) == []


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(categories=["L", "N", "Zs"]), max_size=200))
def test_property_plain_prose_is_kept_as_written(text: str) -> None:
    result = run(text)
    assert result.removed == []
    assert body(result.text) == text.strip() or not text.strip()


@pytest.mark.timeout(120)  # a guard against catastrophic backtracking, not a speed test
@pytest.mark.parametrize("text", [
    "[" * 50_000, "[" * 25_000 + "]" * 25_000, "<a " * 16_000, "a." * 25_000,
    "".join("`" * (i % 50 + 1) + "x" for i in range(1_500)), "http://e.com/ " * 3_500,
    "[[1]]" * 10_000, "<script>" * 6_000, "<!--" * 12_000, "[x](" + "(" * 49_000,
    "\\" * 50_000, "www." * 12_000, "//a." * 12_000,
])
def test_pathological_inputs_finish(text: str) -> None:
    result = run(text[:50_000])
    assert audit(result.text, ALLOWED) == []


# "[a](" repeated took 2.6 s at 50,000 characters (the most an answer may hold): each "(" scanned
# up to 2,048 characters. Every scan must grow linearly (tests/timing.py), and no pattern may cost
# much more than prose of the same length, measured in the same run.
LINEAR_UNITS = ["[a](", "[a](b", "[a](<", "<!--", "<a ", "``x", "[[1]]", "http://e.com/ ",
                "@a ", "#a "]


def _repeat(unit: str, n: int) -> str:
    return (unit * (n // len(unit) + 1))[:n]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("unit", LINEAR_UNITS)
def test_the_sanitizer_is_linear_on_pathological_input(unit: str) -> None:
    from tests.timing import GROWTH_BOUND, growth

    ratio = growth(run, lambda n: _repeat(unit, n), 6_250, repeats=3)
    assert ratio < GROWTH_BOUND, f"{unit!r}: 4x the input took {ratio:.1f}x the time"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("unit", ["[a](", "[a](b"])
def test_pathological_input_costs_about_what_prose_costs(unit: str) -> None:
    from tests.timing import relative_cost

    # The yardstick is an answer's prose, with its citation and full stop: prose with no dot,
    # colon, slash or "@" at all never reaches linkify-it, and costs a fraction of an answer.
    prose = _repeat("Caddy or nginx? Use nginx [[1]]. ", 25_000)
    cost = relative_cost(run, _repeat(unit, 25_000), prose)
    assert cost < 4, f"{unit!r} took {cost:.1f}x the time of prose of the same length"
