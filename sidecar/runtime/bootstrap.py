"""What `sidecar prepare` does before serving: schema, demo forum, embeddings, indexes.

The model itself is prepared by :func:`sidecar.runtime.model_setup.ensure_model`.
"""

from __future__ import annotations

import logging
from importlib import resources as pkg_resources
from pathlib import Path

import psycopg
from tqdm import tqdm

from sidecar.db.embeddings import analyze_embeddings, count_embeddings
from sidecar.db.migrate import forum_owned
from sidecar.db.vector_index import ensure_index
from sidecar.errors import OwnerRequired
from sidecar.ingest.importer import ImportReport, import_dump
from sidecar.ingest.indexing import BatchResult, Indexer
from sidecar.keyword import SyncReport
from sidecar.keyword.changes import catch_up
from sidecar.runtime.resources import Resources

log = logging.getLogger(__name__)


def demo_dir() -> Path:
    """The demo forum dump shipped inside the package."""
    return Path(str(pkg_resources.files("sidecar") / "demo"))


def load_demo(res: Resources) -> ImportReport | None:
    """Import the demo forum into an owned database (idempotent); None on a real forum.

    This node's keyword index is then brought up to date (built the first time).
    """
    with psycopg.connect(res.conninfo("import")) as conn:
        if not forum_owned(conn):
            log.info("the database holds a real forum: not loading the demo")
            return None
        report = import_dump(conn, demo_dir(), res.settings.ts_config)
    sync_keyword(res)
    return report


def sync_keyword(res: Resources) -> SyncReport | None:
    """Log the forum's changes that came without an index event, then apply the change log to
    this node's keyword index (building it if missing)."""
    catch_up(res.db, keep_days=res.settings.keyword_log_days)
    return res.search.keyword.sync()


def backfill_sync(res: Resources, strategy: int, *, progress: bool = True) -> BatchResult:
    """Embed every stale public post in-process, with a progress bar; then build the HNSW index
    and bring this node's keyword index up to date."""
    indexer = Indexer(res.db, res.embedder, res.model, strategy)
    todo = indexer.count_stale()
    total = BatchResult()
    if todo:
        with tqdm(total=todo, desc=f"embedding ({res.model.name}, strategy {strategy})",
                  unit="post", disable=not progress) as bar:
            for ids in indexer.stale_batches(res.settings.backfill_batch_size):
                batch = indexer.embed_posts(ids)
                total.add(batch)
                bar.update(batch.total)
                bar.set_postfix(embedded=total.embedded, unchanged=total.unchanged)
    with res.db.connection() as conn:
        stored = count_embeddings(conn, res.model, strategy)
        if total.embedded:
            analyze_embeddings(conn)
    if stored:
        try:
            ensure_index(res.conninfo("index"), res.model, strategy, res.settings.index_kind,
                         **res.settings.hnsw_build())
        except OwnerRequired as exc:  # search scans without it until the owner builds it
            log.warning("%s", exc.message)
    sync_keyword(res)
    return total
