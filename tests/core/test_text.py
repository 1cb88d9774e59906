"""Cooking Markdown, HTML to text, excerpts, embedded text and digests (pure)."""

from __future__ import annotations

import hashlib
import random

from sidecar.core.strategy import PostSource, digest, prepare_text, strategy_text
from sidecar.core.text import (
    TermMatcher,
    cook,
    excerpt,
    html_to_text,
    normalize_whitespace,
    raw_to_text,
)


def test_cook_renders_markdown_and_discourse_quotes() -> None:
    html = cook('[quote="alice, post:2, topic:17"]\nUse **port 22**\n[/quote]\nI agree.')
    assert '<aside class="quote" data-username="alice" data-post="2" data-topic="17">' in html
    assert "<strong>port 22</strong>" in html
    assert "<p>I agree.</p>" in html


def test_text_keeps_blocks_apart_and_can_drop_quotes() -> None:
    raw = '[quote="bob, post:1, topic:3"]\nold words\n[/quote]\n\n# Title\n\n- one\n- two'
    assert raw_to_text(raw) == "old words\n\nTitle\n\none\ntwo"
    assert raw_to_text(raw, drop_quotes=True) == "Title\n\none\ntwo"
    assert raw_to_text("a  *b*  c\nd") == "a b c d"


def test_html_to_text_skips_scripts_and_survives_broken_html() -> None:
    assert html_to_text("<p>a<script>alert(1)</script>b</p><div>c") == "ab\n\nc"
    assert html_to_text("<p>x</span>y</p>") == "xy"
    assert html_to_text("caf&eacute; &amp; co") == "café & co"


def test_normalize_whitespace() -> None:
    assert normalize_whitespace("  a \t b\r\n\n\n\nc  ") == "a b\n\nc"


def test_excerpt_centres_on_the_best_matching_passage() -> None:
    filler = "Lorem ipsum dolor sit amet. " * 40
    text = filler + "To renew a residence permit bring your passport to the office. " + filler
    cut = excerpt(text, "how do I renew my residence permit", size=120)
    assert "renew a residence permit" in cut
    assert len(cut) <= 125
    assert cut.startswith("… ") and cut.endswith(" …")


def test_excerpt_of_short_text_is_the_text() -> None:
    assert excerpt("short  text", "anything") == "short text"


def test_excerpt_without_matches_starts_at_the_beginning() -> None:
    text = "word " * 200
    cut = excerpt(text, "zebra", size=50)
    assert cut.startswith("word") and cut.endswith("…")


SOURCE = PostSource(post_id=5, topic_id=2, post_number=3, title="Tubeless tyres",
                    category="Repairs", tags=("mtb", "tyres"), text="Use 60 ml of sealant.",
                    opening_text="How much sealant for a 29er?", parent_text="I use 30 ml.")


def test_strategy_one_is_title_category_tags_then_post() -> None:
    assert strategy_text(SOURCE, 1) == (
        "Tubeless tyres\n\nRepairs\n\nmtb, tyres\n\nUse 60 ml of sealant."
    )


def test_strategy_one_without_tags_has_no_empty_block() -> None:
    bare = PostSource(1, 1, 1, "T", "C", (), "body")
    assert strategy_text(bare, 1) == "T\n\nC\n\nbody"


def test_strategy_two_adds_opening_and_parent_excerpts() -> None:
    text = strategy_text(SOURCE, 2)
    assert text.split("\n\n") == ["Tubeless tyres", "How much sealant for a 29er?",
                                  "I use 30 ml.", "Use 60 ml of sealant."]


def test_digest_is_sha1_of_the_exact_truncated_text() -> None:
    text = prepare_text(SOURCE, 1, lambda t: t[:20])
    assert text == strategy_text(SOURCE, 1)[:20]
    assert digest(text) == hashlib.sha1(text.encode()).hexdigest()
    assert digest(text) != digest(strategy_text(SOURCE, 1))


def _pairwise_match(word: str, terms: set[str]) -> bool:
    """The stem rule, term by term (what TermMatcher answers with lookups)."""
    return word in terms or any(
        (len(t) >= 5 and len(word) >= 5 and word[:5] == t[:5])
        or (len(t) >= 4 and word.startswith(t))
        or (len(t) >= 4 and len(word) >= 4 and t.startswith(word)) for t in terms)


def test_term_matcher_agrees_with_the_rule_term_by_term() -> None:
    rng = random.Random(7)
    letters = "aeiorstn"
    for _ in range(300):
        terms = {"".join(rng.choices(letters, k=rng.randint(3, 8))) for _ in range(6)}
        matcher = TermMatcher(terms)
        for _ in range(50):
            word = "".join(rng.choices(letters, k=rng.randint(1, 10)))
            found = matcher.match(word)
            assert (found is not None) == _pairwise_match(word, terms), (word, terms)
            assert found is None or found in terms
    assert TermMatcher({"renew", "visa"}).match("renewal") == "renew"
    assert TermMatcher({"visas"}).match("visa") == "visas"
    assert TermMatcher({"cat"}).match("cats") is None  # too short to be a stem
