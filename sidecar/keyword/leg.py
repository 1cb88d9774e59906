"""The keyword leg: PostgreSQL reads the question, Tantivy ranks by BM25, SQL keeps the public.

1. ``websearch_to_tsquery`` with the forum's text search configuration turns the question into
   lexemes and operators (quotes, ``or``, ``-word``), the words the index holds; a query longer
   than a search box query is a question, whose quotes, "or" and dashes are prose.
2. Tantivy finds the best posts by BM25 over the title, category, tags and body fields (block-max
   WAND: the cost follows the question's words, not the forum's size).
3. The public filter runs in SQL on the ids found, so a post that stopped being public since it
   was indexed is never returned; the index is asked for more when the filter left the page
   short.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import tantivy

from sidecar.core.tsquery import (
    And,
    Follows,
    Node,
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
from sidecar.core.types import PostHit
from sidecar.db import keyword_sql as ksql
from sidecar.db.pool import DictConn
from sidecar.keyword.store import FIELD_BOOSTS, TEXT_FIELDS, schema

# What makes websearch_to_tsquery do more than AND words: "phrases", -exclusions and "or".
_USER_OPERATORS = re.compile(r"\"|(?:^|\s)-\w|\s+or\s+", re.IGNORECASE)
# What a question's text loses before PostgreSQL reads it, so none of it is an operator: quotes
# and a dash against a word ("rpm -Uvh"); "or" is a stop word, and a hyphenated word stays one.
_OPERATOR_MARKS = re.compile(r"\"|(?<!\S)-(?=\S)")
# Asked of the index beyond k, for the posts the public filter may drop.
OVERFETCH = 1.25
MAX_PAGES = 4
_SCHEMA = schema()

Clause = tuple[tantivy.Occur, tantivy.Query]


def keyword_tsquery(conn: DictConn, ts_config: str, query: str,
                    question_words: int = 0) -> tuple[str, bool]:
    """The tsquery the keyword leg searches with, as text ('' when no word is searchable).

    ``websearch_to_tsquery`` understands quotes, ``or`` and ``-word``; but for a plain question it
    ANDs every word, and a forum question rarely shares all its words with the answer. A query
    made only of plain words is therefore relaxed to OR (BM25 rewards posts that match more,
    and rarer, words): the flag says so. Explicit operators are kept as the member wrote them,
    except in a query of more than ``question_words`` words (0: any length), which is read as
    a question: every word is searched, none is an operator.
    """
    query = websearch_text(query)
    question = 0 < question_words < len(query.split())
    if question:
        query = _OPERATOR_MARKS.sub(" ", query)
    text = ksql.websearch_tsquery(conn, ts_config, query)
    relaxed = question or not _USER_OPERATORS.search(query)
    if relaxed:
        # Hyphenated words stay phrases ('c-state' <-> 'c' <-> 'state'): <-> binds tighter.
        text = text.replace(" & ", " | ")
    return text, relaxed


def _postings(searcher: tantivy.Searcher) -> Callable[[str], int]:
    """How many documents hold a word, in any of the searched fields (term dictionary
    lookups, a few microseconds each)."""
    return lambda word: sum(searcher.doc_freq(field, word) for field in TEXT_FIELDS)


def _term_clauses(lexeme: str, times: int = 1) -> list[Clause]:
    return [(tantivy.Occur.Should, tantivy.Query.boost_query(
        tantivy.Query.term_query(_SCHEMA, field, lexeme), FIELD_BOOSTS[field] * times))
        for field in TEXT_FIELDS]


def _phrase_clauses(words: tuple[tuple[int, str], ...], times: int = 1) -> list[Clause]:
    return [(tantivy.Occur.Should, tantivy.Query.boost_query(
        tantivy.Query.phrase_query(_SCHEMA, field, list(words)), FIELD_BOOSTS[field] * times))
        for field in TEXT_FIELDS]


def _should(node: Node, times: int = 1) -> list[Clause]:
    """The node as OR-ed clauses, each weighing ``times``.

    A disjunction of terms stays flat, which is what lets Tantivy skip blocks of postings that
    cannot reach the top k (block-max WAND). A word the question repeats weighs as many times
    (BM25's query term frequency), as one clause: BM25 is linear in the boost.
    """
    if isinstance(node, Term):
        return _term_clauses(node.lexeme, times)
    if isinstance(node, Phrase):
        return _phrase_clauses(node.words, times)
    if isinstance(node, Or):
        counts: dict[Node, int] = {}
        for child in node.operands:
            counts[child] = counts.get(child, 0) + 1
        return [clause for child, n in counts.items() for clause in _should(child, n * times)]
    return [(tantivy.Occur.Should, tantivy.Query.boost_query(to_query(node), float(times)))]


def to_query(node: Node) -> tantivy.Query:
    """A Tantivy query matching what the tsquery matches (``<N>`` between more than plain
    phrases is read as: both sides present)."""
    if isinstance(node, (Term, Phrase, Or)):
        return tantivy.Query.boolean_query(_should(node))
    if isinstance(node, And):
        return tantivy.Query.boolean_query([
            (tantivy.Occur.MustNot, to_query(child.operand)) if isinstance(child, Not)
            else (tantivy.Occur.Must, to_query(child))
            for child in node.operands])
    if isinstance(node, Follows):
        return to_query(And((node.left, node.right)))
    if isinstance(node, Not):
        return tantivy.Query.boolean_query([
            (tantivy.Occur.Must, tantivy.Query.all_query()),
            (tantivy.Occur.MustNot, to_query(node.operand))])
    raise TypeError(f"not a tsquery node: {node!r}")


def keyword_leg(
    conn: DictConn,
    searcher: tantivy.Searcher,
    *,
    ts_config: str,
    query: str,
    k: int,
    max_words: int = 0,
    question_words: int = 0,
    exclude_topics: frozenset[int] = frozenset(),
) -> list[PostHit]:
    """The ``k`` best public posts for ``query`` by BM25, best first (score = BM25); a plain
    question is searched with its ``max_words`` rarest words (0: all of them), and a query of
    more than ``question_words`` words (0: any length) is a plain question; posts of
    ``exclude_topics`` are dropped like private ones."""
    tsquery, relaxed = keyword_tsquery(conn, ts_config, query, question_words)
    node = parse_tsquery(tsquery) if tsquery else None
    if node is None or not positive_lexemes(node):
        return []
    # A plain question is an OR of words only: a phrase among them (a hyphenated word) would
    # keep Tantivy from skipping postings (block-max WAND needs a disjunction of terms).
    if relaxed:
        words = as_words(node)
        node = rarest_words(words, _postings(searcher), max_words) if max_words else words
    tv_query = to_query(node)
    hits: list[PostHit] = []
    offset, want = 0, int(k * OVERFETCH) + 10
    for _ in range(MAX_PAGES):
        page = searcher.search(tv_query, limit=want, offset=offset, count=False).hits
        if not page:
            break
        ids = [int(i or 0) for i in searcher.fast_field_values("post_id", [a for _, a in page])]
        public = ksql.public_topics(conn, ids, sorted(exclude_topics))
        # Equal scores are ordered by post id, as every node would (not by segment order).
        found = sorted((-score, post_id) for (score, _), post_id in zip(page, ids, strict=True)
                       if post_id in public)
        for neg_score, post_id in found[:k - len(hits)]:
            hits.append(PostHit(post_id=post_id, topic_id=public[post_id],
                                rank=len(hits) + 1, score=float(-neg_score)))
        if len(hits) >= k or len(page) < want:
            break
        offset += want
        want *= 2
    return hits
