"""Reading PostgreSQL's tsquery and tsvector text back (pure; the SQL round trip is in
tests/integration/test_keyword_index.py)."""

from __future__ import annotations

import pytest

from sidecar.core.tsquery import (
    And,
    Follows,
    Not,
    Or,
    Phrase,
    Term,
    as_words,
    parse_tsquery,
    positive_lexemes,
    rarest_words,
    websearch_text,
)
from sidecar.core.tsvector import field_tokens


def test_plain_words_or_and_not() -> None:
    node = parse_tsquery("'bank' & !'loan' & ( 'doha' | 'qatar' )")
    assert node == And((Term("bank"), Not(Term("loan")), Or((Term("doha"), Term("qatar")))))
    assert positive_lexemes(node) == ["bank", "doha", "qatar"]


def test_or_binds_looser_than_and() -> None:
    assert parse_tsquery("'a' & 'b' | 'c'") == Or((And((Term("a"), Term("b"))), Term("c")))


def test_phrases_keep_postgresql_distances() -> None:
    # "the cat in the hat": stop words leave gaps, which the index keeps too.
    assert parse_tsquery("'cat' <3> 'hat'") == Phrase(((0, "cat"), (3, "hat")))
    assert parse_tsquery("'a' <-> 'b' <-> 'c'") == Phrase(((0, "a"), (1, "b"), (2, "c")))
    assert parse_tsquery("'a' <-> ( 'b' <2> 'c' )") == Phrase(((0, "a"), (1, "b"), (3, "c")))


def test_a_phrase_of_alternatives_is_both_sides_present() -> None:
    node = parse_tsquery("( 'a' | 'b' ) <-> 'c'")
    assert node == Follows(Or((Term("a"), Term("b"))), Term("c"), 1)
    assert positive_lexemes(node) == ["a", "b", "c"]


def test_a_plain_question_as_words_keeps_repeats_and_splits_phrases() -> None:
    node = parse_tsquery("'c-stat' <-> 'c' <-> 'state' | 'idl' | 'state'")
    assert as_words(node) == Or((Term("c-stat"), Term("c"), Term("state"), Term("idl"),
                                 Term("state")))
    assert as_words(parse_tsquery("'zfs'")) == Term("zfs")


def test_quotes_and_backslashes_are_unescaped() -> None:
    assert parse_tsquery("'it''s' | 'c:\\\\dir'") == Or((Term("it's"), Term("c:\\dir")))


def test_empty_and_malformed() -> None:
    assert parse_tsquery("") is None
    assert positive_lexemes(parse_tsquery("!'a'")) == []
    with pytest.raises(ValueError):
        parse_tsquery("'a' &")
    with pytest.raises(ValueError):
        parse_tsquery("( 'a'")


def test_tsvector_tokens_by_field_in_position_order() -> None:
    text = "'bank':2A,14,20 'advic':3B 'best':1A,19 'zfs':5C 'it''s':7"
    assert field_tokens(text) == {
        "title": [(1, "best"), (2, "bank")],
        "category": [(3, "advic")],
        "tags": [(5, "zfs")],
        "body": [(7, "it's"), (14, "bank"), (19, "best"), (20, "bank")],
    }


def test_a_stripped_tsvector_is_body_words() -> None:
    assert field_tokens("'a' 'b'") == {"body": [(0, "a"), (0, "b")]}
    assert field_tokens("") == {}


@pytest.mark.parametrize(("query", "read"), [
    ("Proxmox - fan noise", "Proxmox fan noise"),  # a separator, not "not fan"
    ("-----BEGIN PGP SIGNED MESSAGE-----", "BEGIN PGP SIGNED MESSAGE"),
    ("spam? - -- - ---- Robin", "spam? Robin"),
    ("rpm --rebuild", "rpm rebuild"),
    ("windows -linux", "windows -linux"),  # the member's exclusion stays
    ("c-state x-y", "c-state x-y"),  # hyphenated words stay
])
def test_only_a_dash_against_a_word_excludes_it(query: str, read: str) -> None:
    assert websearch_text(query).split() == read.split()


def test_a_long_question_keeps_its_rarest_words() -> None:
    held = {"zfs": 3, "scrub": 9, "pool": 40, "the": 900, "error": 120, "qwxyz": 0}
    words = as_words(parse_tsquery(
        "'the' | 'zfs' | 'pool' | 'qwxyz' | 'scrub' | 'error' | 'zfs' | 'the'"))
    kept = rarest_words(words, held.__getitem__, 3)
    # The three rarest words held by some document, repeats and order as asked.
    assert kept == Or((Term("zfs"), Term("pool"), Term("scrub"), Term("zfs")))
    # A question within the limit is searched as asked (nothing looked up).
    assert rarest_words(words, lambda w: 1 // 0, 6) == words
    assert rarest_words(Term("zfs"), held.__getitem__, 0) == Term("zfs")
    # Nothing held anywhere: the question stays as it is (it finds nothing either way).
    assert rarest_words(words, lambda w: 0, 2) == words
