"""The two post-level retrieval legs, as SQL, with the public filter applied inside each query."""

from __future__ import annotations

import math
import re
import time

import numpy as np
from pgvector import HalfVector
from psycopg import sql

from sidecar.core.types import PostHit
from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE

# The largest hnsw.ef_search pgvector accepts.
EF_SEARCH_MAX = 1000
# A lexeme in tsquery text: 'word' (a quote inside is doubled).
_LEXEME = r"'(?:[^']|'')+'"
# What makes websearch_to_tsquery do more than AND words: "phrases", -exclusions and "or".
_USER_OPERATORS = re.compile(r"\"|(?:^|\s)-\w|\s+or\s+", re.IGNORECASE)


def _set_local(conn: DictConn, name: str, value: str) -> None:
    # set_config(..., true) is SET LOCAL: it ends with the transaction, never leaks to the pool.
    conn.execute("SELECT set_config(%s, %s, true)", (name, value))


def semantic_leg(
    conn: DictConn,
    *,
    model_id: int,
    strategy_id: int,
    dimensions: int,
    vector: np.ndarray,
    k: int,
    ef_search_min: int = 40,
    iterative_scan: bool = True,
    binary: bool = False,
    binary_overfetch: int = 4,
) -> list[PostHit]:
    """Nearest public posts by cosine distance on the (model, strategy) partial HNSW index.

    ``hnsw.ef_search`` is raised to at least the number of candidates asked, since it caps how
    many rows one HNSW scan returns; with pgvector >= 0.8 iterative scans keep going when the
    public filter discards candidates, so filtering never leaves the page short. With ``binary``
    the bit-quantized index finds ``k * binary_overfetch`` candidates that are then re-ranked
    exactly on the halfvec (discourse-ai's scheme).
    """
    fetch = k * binary_overfetch if binary else k
    # pgvector refuses ef_search above 1000; beyond that the iterative scan supplies the rest.
    _set_local(conn, "hnsw.ef_search", str(min(EF_SEARCH_MAX, max(ef_search_min, fetch))))
    if iterative_scan:
        _set_local(conn, "hnsw.iterative_scan", "strict_order")
    # Model and strategy ids are inlined as literals so the planner can match the partial index.
    params = {
        "mid": sql.Literal(model_id),
        "sid": sql.Literal(strategy_id),
        "dims": sql.Literal(dimensions),
        "joins": sql.SQL(PUBLIC_JOINS),
        "public": sql.SQL(PUBLIC_WHERE),
    }
    if binary:
        query = sql.SQL(
            """
            WITH candidates AS (
                SELECT e.post_id, p.topic_id, e.embeddings::halfvec({dims}) AS emb
                FROM ai_posts_embeddings e
                JOIN posts p ON p.id = e.post_id {joins}
                WHERE e.model_id = {mid} AND e.strategy_id = {sid} AND {public}
                ORDER BY binary_quantize(e.embeddings)::bit({dims})
                         <~> binary_quantize(%(q)s::halfvec({dims}))::bit({dims})
                LIMIT %(fetch)s
            )
            SELECT post_id, topic_id, 1 - (emb <=> %(q)s::halfvec({dims})) AS similarity
            FROM candidates ORDER BY emb <=> %(q)s::halfvec({dims}), post_id LIMIT %(k)s
            """
        ).format(**params)
    else:
        query = sql.SQL(
            """
            SELECT e.post_id, p.topic_id,
                   1 - (e.embeddings::halfvec({dims}) <=> %(q)s::halfvec({dims})) AS similarity
            FROM ai_posts_embeddings e
            JOIN posts p ON p.id = e.post_id {joins}
            WHERE e.model_id = {mid} AND e.strategy_id = {sid} AND {public}
            ORDER BY e.embeddings::halfvec({dims}) <=> %(q)s::halfvec({dims})
            LIMIT %(k)s
            """
        ).format(**params)
    rows = conn.execute(
        query, {"q": HalfVector(vector.astype(np.float32)), "k": k, "fetch": fetch}
    ).fetchall()
    return [
        PostHit(post_id=r["post_id"], topic_id=r["topic_id"], rank=i, score=float(r["similarity"]))
        for i, r in enumerate(rows, start=1)
    ]


def keyword_tsquery(conn: DictConn, ts_config: str, query: str) -> tuple[str, bool]:
    """The tsquery the keyword leg matches with, as text ('' when no word is searchable).

    ``websearch_to_tsquery`` understands quotes, ``or`` and ``-word``; but for a plain question it
    ANDs every word, and a forum question rarely shares all its words with the answer. A query
    made only of plain words is therefore relaxed to OR, and the ranking (below) rewards posts
    that match more, and rarer, words. Explicit operators are kept as the member wrote them.
    """
    row = conn.execute(
        "SELECT websearch_to_tsquery(%s::regconfig, %s)::text AS q", (ts_config, query)
    ).fetchone()
    text = str(row["q"]) if row else ""
    relaxed = not _USER_OPERATORS.search(query)
    if relaxed:
        # Hyphenated words stay phrases ('c-state' <-> 'c' <-> 'state'): <-> binds tighter.
        text = text.replace(" & ", " | ")
    return text, relaxed


def positive_lexemes(tsquery: str) -> list[str]:
    """The quoted lexemes of a tsquery text that are not negated, in order, without repeats."""
    found: list[str] = []
    for match in re.finditer(rf"(!\s*)?({_LEXEME})", tsquery):
        if not match.group(1) and match.group(2) not in found:
            found.append(match.group(2))
    return found


# BM25 constants (Robertson's defaults) and the term-frequency weight of a word by where it
# occurs: Discourse's search data puts the title in A, the category in B, tags in C, body in D.
BM25_K1 = 1.2
BM25_B = 0.75
FIELD_WEIGHTS = {"A": 2.0, "B": 0.5, "C": 1.0, "D": 1.0}


class TermStats:
    """Corpus statistics for BM25: document count, mean length, document frequency per lexeme.

    PostgreSQL's ``ts_rank`` has no notion of how rare a word is, so a question's common words
    ("server", "problem") outweigh its distinctive ones. The keyword leg therefore scores with
    BM25, counting document frequencies with the GIN index. The figures move slowly, so they are
    cached per process for a while.
    """

    def __init__(self, ttl_s: float = 600.0, max_entries: int = 50_000) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._df: dict[str, tuple[float, int]] = {}
        self._corpus: tuple[float, int, float] | None = None  # (when, N, mean length)

    def corpus(self, conn: DictConn) -> tuple[int, float]:
        """(number of documents, mean document length in distinct lexemes)."""
        now = time.monotonic()
        if self._corpus is None or now - self._corpus[0] > self.ttl_s:
            row = conn.execute(
                "SELECT greatest(reltuples::bigint, 0) AS n FROM pg_class"
                " WHERE oid = 'post_search_data'::regclass"
            ).fetchone()
            estimate = int(row["n"]) if row else 0
            # A sample is plenty for a mean; an exact count only while the table is small.
            sample = "TABLESAMPLE SYSTEM (5)" if estimate > 200_000 else ""
            row = conn.execute(
                sql.SQL(
                    "SELECT count(*) AS n, avg(length(search_data))::float8 AS avgdl"
                    " FROM post_search_data {} WHERE search_data IS NOT NULL"
                ).format(sql.SQL(sample))
            ).fetchone()
            n = estimate if sample else int(row["n"]) if row else 0
            avgdl = float(row["avgdl"] or 1.0) if row else 1.0
            self._corpus = (now, max(n, 1), max(avgdl, 1.0))
        return self._corpus[1], self._corpus[2]

    def idf(self, conn: DictConn, lexemes: list[str]) -> dict[str, float]:
        """BM25 idf of each lexeme: ln(1 + (N - df + 0.5) / (df + 0.5))."""
        n, _ = self.corpus(conn)
        now = time.monotonic()
        missing = [lx for lx in lexemes
                   if lx not in self._df or now - self._df[lx][0] > self.ttl_s]
        if missing:
            if len(self._df) > self.max_entries:
                self._df.clear()
            rows = conn.execute(
                "SELECT lx, (SELECT count(*) FROM post_search_data"
                " WHERE search_data @@ lx::tsquery) AS df FROM unnest(%s::text[]) AS lx",
                (missing,),
            ).fetchall()
            for r in rows:
                self._df[r["lx"]] = (now, int(r["df"]))
        return {lx: math.log(1 + (n - self._df[lx][1] + 0.5) / (self._df[lx][1] + 0.5))
                for lx in lexemes}


# A plain question matches posts by its distinctive words only: a word found in more than this
# share of posts ("server", "use") adds almost nothing to BM25 but would make every post a
# candidate to score. It still counts in the score of the posts that match otherwise.
MATCH_MAX_DF = 0.1
MATCH_MIN_TERMS = 3
# BM25 is computed in SQL for at most this many posts (or 4 x k), pre-selected by PostgreSQL's
# own ts_rank: it bounds the cost on a large forum; measured on the eval forum, it changes no
# metric (MRR@10 0.448 -> 0.450) and divides the leg's time by about 4.
KW_POOL = 1000


def match_query(lexemes: list[str], idf: dict[str, float], n_docs: int) -> str:
    """OR of the query's rarer lexemes (at least the ``MATCH_MIN_TERMS`` rarest)."""
    floor = math.log(1 + (n_docs - MATCH_MAX_DF * n_docs + 0.5) / (MATCH_MAX_DF * n_docs + 0.5))
    by_rarity = sorted(lexemes, key=lambda lx: -idf[lx])
    chosen = [lx for lx in by_rarity if idf[lx] >= floor] or by_rarity
    if len(chosen) < MATCH_MIN_TERMS:
        chosen = by_rarity[:MATCH_MIN_TERMS]
    return " | ".join(chosen)


def _unquote(lexeme: str) -> str:
    # 'it''s' -> it's : the form unnest(tsvector) returns.
    return lexeme[1:-1].replace("''", "'")


def keyword_leg(
    conn: DictConn,
    *,
    ts_config: str,
    query: str,
    k: int,
    stats: TermStats | None = None,
) -> list[PostHit]:
    """Public posts matching the query in ``post_search_data``, best BM25 score first.

    Term frequency counts each occurrence by its field weight (title above body), document length
    is the number of distinct lexemes, idf comes from the GIN index. The match is the websearch
    tsquery; a plain question matches on its distinctive words (OR). The best ``KW_POOL`` matches
    by ``ts_rank`` are then scored with BM25 over every word of the question.
    """
    tsquery, relaxed = keyword_tsquery(conn, ts_config, query)
    if not tsquery:
        return []
    lexemes = positive_lexemes(tsquery)
    if not lexemes:
        return []
    stats = stats or TermStats()
    n_docs, avgdl = stats.corpus(conn)
    idf = stats.idf(conn, lexemes)
    if relaxed:
        tsquery = match_query(lexemes, idf, n_docs)
    weight = sql.SQL("CASE w {} ELSE 1.0 END").format(sql.SQL(" ").join(
        sql.SQL("WHEN {} THEN {}").format(sql.Literal(f), sql.Literal(v))
        for f, v in FIELD_WEIGHTS.items()))
    rows = conn.execute(
        sql.SQL(
            """
            WITH candidates AS (
                SELECT p.id AS post_id, p.topic_id, d.search_data
                FROM post_search_data d
                JOIN posts p ON p.id = d.post_id {joins}
                WHERE d.search_data @@ %(tsq)s::tsquery AND {public}
                ORDER BY ts_rank(d.search_data, %(tsq)s::tsquery) DESC
                LIMIT %(pool)s
            )
            SELECT c.post_id, c.topic_id, s.score
            FROM candidates c
            CROSS JOIN LATERAL (
                SELECT sum(q.idf * t.tf * (%(k1)s + 1)
                           / (t.tf + %(k1)s * (1 - %(b)s
                                               + %(b)s * length(c.search_data) / %(avgdl)s)))
                       AS score
                FROM (SELECT u.lexeme, sum({weight}) AS tf
                      FROM unnest(c.search_data) AS u,
                           unnest(coalesce(u.weights, '{{D}}'::text[])) AS w
                      WHERE u.lexeme = ANY(%(lx)s) GROUP BY u.lexeme) AS t
                JOIN unnest(%(lx)s::text[], %(idf)s::float8[]) AS q(lexeme, idf)
                     ON q.lexeme = t.lexeme
            ) AS s
            ORDER BY s.score DESC NULLS LAST, c.post_id
            LIMIT %(k)s
            """
        ).format(weight=weight, joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE)),
        {"tsq": tsquery, "k": k, "pool": max(KW_POOL, 4 * k), "k1": BM25_K1, "b": BM25_B,
         "avgdl": avgdl, "lx": [_unquote(lx) for lx in lexemes],
         "idf": [idf[lx] for lx in lexemes]},
    ).fetchall()
    return [
        PostHit(post_id=r["post_id"], topic_id=r["topic_id"], rank=i,
                score=float(r["score"] or 0.0))
        for i, r in enumerate(rows, start=1)
    ]
