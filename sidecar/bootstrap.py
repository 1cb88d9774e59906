"""What `sidecar prepare` does before serving: schema, demo forum, embeddings, index.

The model itself is prepared by :func:`sidecar.model_setup.ensure_model`.
"""

from __future__ import annotations

import logging
from importlib import resources as pkg_resources
from pathlib import Path

import psycopg
from tqdm import tqdm

from sidecar.db.embeddings import count_embeddings, ensure_index
from sidecar.db.migrate import forum_owned
from sidecar.importer import ImportReport, import_dump
from sidecar.indexing import BatchResult, Indexer
from sidecar.resources import Resources

log = logging.getLogger(__name__)


def demo_dir() -> Path:
    """The demo forum dump shipped inside the package."""
    return Path(str(pkg_resources.files("sidecar") / "demo"))


def load_demo(res: Resources) -> ImportReport | None:
    """Import the demo forum into an owned database (idempotent); None on a real forum."""
    with psycopg.connect(res.urls.database_url) as conn:
        if not forum_owned(conn):
            log.info("the database holds a real forum: not loading the demo")
            return None
        return import_dump(conn, demo_dir(), res.settings.ts_config)


def backfill_sync(res: Resources, strategy: int, *, progress: bool = True) -> BatchResult:
    """Embed every stale public post in-process, with a progress bar; then build the index."""
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
            conn.execute("ANALYZE ai_posts_embeddings")
    if stored:
        ensure_index(res.urls.database_url, res.model, strategy, res.settings.index_kind)
    return total
