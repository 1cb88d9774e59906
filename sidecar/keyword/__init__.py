"""The keyword leg's own index: Tantivy (BM25) over the public posts, one copy per node.

``rebuild_keyword_index`` is what a bulk load (an import, a benchmark forum) calls afterwards;
``sidecar keyword rebuild`` is the same from the shell. See docs/keyword.md.

Imports: ``core`` and ``db``. Imported by ``search`` (the keyword leg), ``runtime`` (the sync of
``sidecar prepare``), ``jobs``, ``cli`` and ``bench``.
"""

from __future__ import annotations

from pathlib import Path

from sidecar.db import Database
from sidecar.keyword.leg import keyword_leg, keyword_tsquery
from sidecar.keyword.node import KeywordIndex, SyncReport

__all__ = ["KeywordIndex", "SyncReport", "keyword_leg", "keyword_tsquery",
           "rebuild_keyword_index"]


def rebuild_keyword_index(db: Database, state_dir: Path, ts_config: str) -> SyncReport:
    """Build this node's keyword index of ``db`` from every public post (embeds nothing), under
    ``<state_dir>/keyword/``, and switch searches to it (the API's processes within a second).
    """
    return KeywordIndex(db, state_dir, ts_config).rebuild()
