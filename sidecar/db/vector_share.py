"""How much of a (model, strategy) HNSW index the public filter lets through.

The sidecar's own backfill stores vectors of public posts only, but the table is discourse-ai's:
on a forum where discourse-ai embeds too, it holds vectors of read-restricted categories (and of
private messages with ``ai_embeddings_generate_for_pms``) under the same model and strategy.
The HNSW scan visits them and the public filter drops them, so the first ``hnsw.ef_search``
candidates hold only ``share * ef_search`` public ones: with half the vectors private, recall@10
at 1M posts and 1,024 dims fell from 0.991 to 0.936-0.949 at the same ``ef_search``
(docs/performance.md, "Private vectors in the index"). The semantic leg divides its
``ef_search`` by this share, so that it examines as many public candidates either way.

The share is estimated from a block sample of the table (a full count on a small one) and kept
per process for ``TTL_S``: it moves with backfills and permission changes, not per query.
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

from psycopg import sql

from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_WHERE

# Rows the estimate reads: a standard error under 1% for any share, in a few tens of ms.
SAMPLE_ROWS = 20_000
# How long one process trusts an estimate: a backfill or a permission change moves the share
# over hours; a stale one only costs recall or CPU, never privacy (the filter is in the query).
TTL_S = 600.0


@dataclass(frozen=True)
class IndexShare:
    """Vectors of one (model, strategy) seen by the estimate, and how many are public."""

    vectors: int
    public: int

    @property
    def share(self) -> float:
        """Public share of the index (1.0 when empty: nothing is filtered out)."""
        return self.public / self.vectors if self.vectors else 1.0


def scaled_ef_search(ef_search_min: int, share: float, ceiling: int) -> int:
    """``ef_search`` that leaves about ``ef_search_min`` public candidates, at most ``ceiling``."""
    return min(ceiling, max(ef_search_min, math.ceil(ef_search_min / max(share, 1e-3))))


def estimate_share(conn: DictConn, model_id: int, strategy_id: int,
                   sample_rows: int = SAMPLE_ROWS) -> IndexShare:
    """Count the (model, strategy) vectors of a sample of the table (about ``sample_rows``
    rows of it, all of a smaller one) and the public ones among them.

    Left joins: a private message has no category, and an inner join would drop its vector
    from the count instead of counting it as filtered out (PUBLIC_WHERE is NULL on it).
    """
    row = conn.execute(
        "SELECT reltuples::bigint AS n FROM pg_class WHERE oid = 'ai_posts_embeddings'::regclass"
    ).fetchone()
    rows = int(row["n"]) if row else -1
    # reltuples is -1 before the first ANALYZE: count everything then.
    percent = 100.0 if rows <= sample_rows else 100.0 * sample_rows / rows
    sample = sql.SQL("") if percent >= 100.0 else sql.SQL("TABLESAMPLE SYSTEM ({})").format(
        sql.Literal(round(percent, 4)))
    counted = conn.execute(
        sql.SQL(
            """
            SELECT count(*) AS vectors, count(*) FILTER (WHERE {public}) AS public
            FROM ai_posts_embeddings e {sample}
            LEFT JOIN posts p ON p.id = e.post_id
            LEFT JOIN topics t ON t.id = p.topic_id
            LEFT JOIN categories c ON c.id = t.category_id
            WHERE e.model_id = %s AND e.strategy_id = %s
            """
        ).format(public=sql.SQL(PUBLIC_WHERE), sample=sample),
        (model_id, strategy_id),
    ).fetchone()
    assert counted is not None  # an aggregate always returns a row
    return IndexShare(vectors=int(counted["vectors"]), public=int(counted["public"]))


class ShareCache:
    """Each (model, strategy)'s estimate, refreshed after ``ttl_s`` (one per process)."""

    def __init__(self, ttl_s: float = TTL_S) -> None:
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._known: dict[tuple[int, int], tuple[float, IndexShare]] = {}

    def get(self, conn: DictConn, model_id: int, strategy_id: int) -> IndexShare:
        """The cached estimate, or a new one on ``conn`` when none is fresh."""
        key = (model_id, strategy_id)
        with self._lock:
            cached = self._known.get(key)
        if cached is not None and time.monotonic() - cached[0] < self.ttl_s:
            return cached[1]
        # Two threads may both estimate once: harmless, and no lock is held across a query.
        found = estimate_share(conn, model_id, strategy_id)
        with self._lock:
            self._known[key] = (time.monotonic(), found)
        return found
