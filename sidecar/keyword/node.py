"""This node's keyword index of one database: read it, keep it in sync, rebuild it.

Every node (every machine serving the API) has its own copy under ``SIDECAR_STATE_DIR``. They
converge by applying the same change log from PostgreSQL (``sidecar_keyword_changes``), in order;
a node that has no index, an index of an older shape, or one older than the pruned part of the
log builds a new one from the forum's public posts while the old one keeps serving, then
switches to it. On one node, a file lock lets one process (gunicorn worker, CLI, ...) write while
the others read; they notice a new commit or a new build within ``CHECK_S``.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tantivy

from sidecar.db import Database
from sidecar.db import keyword_sql as ksql
from sidecar.keyword.store import (
    BUILD_HEAP,
    SCHEMA_VERSION,
    IndexFolder,
    SyncState,
    Writer,
    open_index,
)

log = logging.getLogger(__name__)

CHECK_S = 1.0  # how often a reader looks for a newer commit or build
LOG_BATCH = 5000  # change-log rows applied per commit


@dataclass
class SyncReport:
    """What one sync did."""

    rebuilt: bool = False
    changes: int = 0  # change-log rows applied
    posts: int = 0  # distinct posts they named (their documents deleted, then re-read)
    added: int = 0  # documents written (public posts)
    docs: int = 0  # documents in the index now
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"rebuilt": self.rebuilt, "changes": self.changes, "posts": self.posts,
                "added": self.added, "docs": self.docs, "seconds": round(self.seconds, 3)}


class KeywordIndex:
    """The keyword index of one database on this node."""

    def __init__(self, db: Database, state_dir: Path, ts_config: str) -> None:
        self.db = db
        self.state_dir = state_dir
        # The forum's text search configuration: a topic's visible tags are made into lexemes
        # with it when a hidden tag is left out of its documents (sidecar/db/keyword_sql.py).
        self.ts_config = ts_config
        self._folder: IndexFolder | None = None
        self._reader: tuple[Path, tantivy.Index, int] | None = None  # (build, index, meta mtime)
        self._checked = 0.0
        self._mutex = threading.Lock()  # one sync per process at a time
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.last_error: str | None = None

    # --- where ------------------------------------------------------------------------------
    def folder(self) -> IndexFolder:
        """The index's folders (named by the database's keyword index id)."""
        if self._folder is None:
            with self.db.connection() as conn:
                name = ksql.index_id(conn)
            self._folder = IndexFolder(self.state_dir / "keyword" / name)
            self._folder.root.mkdir(parents=True, exist_ok=True)
        return self._folder

    # --- reading ----------------------------------------------------------------------------
    def searcher(self) -> tantivy.Searcher | None:
        """A view of the latest commit of the live build; None when this node has no index.

        An index that cannot be read (a damaged folder) counts as missing: the keyword leg
        then finds nothing, and ``describe()`` (``/v1/health``) says why.
        """
        now = time.monotonic()
        if self._reader is None or now - self._checked >= CHECK_S:
            self._checked = now
            try:
                self._refresh_reader()
            except Exception as exc:
                self._reader = None
                self.last_error = f"reading the index: {type(exc).__name__}: {exc}"
                log.warning("keyword index unreadable: %s", self.last_error)
        reader = self._reader  # another thread may replace it meanwhile
        return reader[1].searcher() if reader else None

    def refresh(self) -> None:
        """Look for a newer commit or build at the next search (else within ``CHECK_S``)."""
        self._checked = 0.0

    def _refresh_reader(self) -> None:
        build = self.folder().current()
        if build is None:
            self._reader = None
            return
        try:
            mtime = (build / "meta.json").stat().st_mtime_ns
        except OSError:
            self._reader = None
            return
        if self._reader is None or self._reader[0] != build:
            self._reader = (build, open_index(build), mtime)
        elif self._reader[2] != mtime:
            self._reader[1].reload()
            self._reader = (build, self._reader[1], mtime)

    # --- writing ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def _node_lock(self, wait: bool) -> Iterator[bool]:
        if not self._mutex.acquire(blocking=wait):
            yield False
            return
        try:
            folder = self.folder()
            with open(folder.lock_path, "a+b") as handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
                except BlockingIOError:
                    yield False
                    return
                try:
                    yield True
                finally:
                    fcntl.flock(handle, fcntl.LOCK_UN)
        finally:
            self._mutex.release()

    def sync(self, *, build_missing: bool = True, wait: bool = True) -> SyncReport | None:
        """Apply the change log; build the index first when it is missing or unusable.

        Returns None when nothing could be done: another process of this node holds the lock
        (``wait=False``), or there is no index and ``build_missing`` is false.
        """
        with self._node_lock(wait) as held:
            if not held:
                return None
            started = time.monotonic()
            build = self.folder().current()
            state = SyncState.load(build) if build else None
            with self.db.connection() as conn:
                pruned = ksql.pruned_to(conn)
            if build is None or state is None or state.schema != SCHEMA_VERSION \
                    or state.last_change < pruned:
                if not build_missing:
                    return None
                report = self._rebuild_locked()
            else:
                report = self._apply_log(build, state)
            report.seconds = time.monotonic() - started
            self.refresh()  # this process reads the new commit at once
            self.last_error = None
            return report

    def rebuild(self) -> SyncReport:
        """Build a new index from every public post, switch to it, then apply the log."""
        with self._node_lock(True):
            started = time.monotonic()
            report = self._rebuild_locked()
            report.seconds = time.monotonic() - started
            self.refresh()
            self.last_error = None
            return report

    def _rebuild_locked(self) -> SyncReport:
        folder = self.folder()
        build = folder.new_build()
        try:
            # One thread and a large budget: one segment, the fastest to search.
            writer = Writer(open_index(build), threads=1, heap=BUILD_HEAP)
            with self.db.connection() as conn:
                # One snapshot for the documents and the log position: a change logged after it
                # is applied below; one logged before it is already in the documents.
                ksql.repeatable_read(conn)
                last = ksql.last_change(conn)
                ksql.set_watermark_once(conn, ksql.utc_now(conn) - ksql.CATCH_UP_MARGIN)
                writer.add(ksql.all_public_documents(conn, self.ts_config))
            writer.commit()
            writer.close()
            now = time.time()
            state = SyncState(schema=SCHEMA_VERSION, last_change=last, built_at=now,
                              synced_at=now, docs=writer.added)
            state.save(build)
            folder.switch(build)
        except BaseException:
            shutil.rmtree(build, ignore_errors=True)
            raise
        log.info("keyword index built: %d posts in %s", writer.added, build)
        report = self._apply_log(build, state, after_rebuild=True)
        report.rebuilt = True
        report.added += writer.added
        return report

    def _apply_log(self, build: Path, state: SyncState, *,
                   after_rebuild: bool = False) -> SyncReport:
        """Apply the log after ``state.last_change`` to ``build``, a batch per commit.

        Every logged post's document is deleted and the public ones are read again, so
        applying a change twice is harmless. A rebuild asked of every node (a NULL post id in
        the log) rebuilds instead; right after a rebuild such a request is already met.
        """
        report = SyncReport(docs=state.docs)
        index: tantivy.Index | None = None
        writer: Writer | None = None
        rebuild_asked = False
        try:
            while True:
                with self.db.connection() as conn:
                    changes = ksql.changes_after(conn, state.last_change, LOG_BATCH)
                    if not changes:
                        break
                    if not after_rebuild and any(pid is None for _, pid in changes):
                        rebuild_asked = True
                        break
                    ids = sorted({pid for _, pid in changes if pid is not None})
                    documents = ksql.public_documents(conn, ids, self.ts_config)
                index = index or open_index(build)
                writer = writer or Writer(index)
                writer.delete(ids)
                writer.add(documents)
                writer.commit()
                report.changes += len(changes)
                report.posts += len(ids)
                report.added += len(documents)
                state.last_change = changes[-1][0]
                state.synced_at = time.time()
                state.save(build)
        finally:
            if writer is not None:
                writer.close()
        if rebuild_asked:
            return self._rebuild_locked()
        if index is not None:
            index.reload()
            state.docs = report.docs = index.searcher().num_docs
        state.synced_at = time.time()
        state.save(build)
        return report

    # --- in the background (API processes) --------------------------------------------------
    def start(self, interval_s: float) -> None:
        """Keep this node's index in sync from a daemon thread (built at once if missing)."""
        if self._thread is not None or interval_s <= 0:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, args=(interval_s,),
                                        name="sidecar-keyword-sync", daemon=True)
        self._thread.start()

    def _loop(self, interval_s: float) -> None:
        while not self._stop.is_set():
            try:
                report = self.sync(wait=False)
                if report is not None and (report.changes or report.rebuilt):
                    log.info("keyword index synced: %s", report.as_dict())
            except Exception as exc:  # the next round retries; health shows the reason
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("keyword index sync failed: %s", self.last_error)
            self._stop.wait(interval_s)

    def close(self) -> None:
        """Stop the background thread (if any)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    # --- what it is -------------------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """This node's index as /v1/health shows it (local files only, no query)."""
        try:
            build = self.folder().current()
        except Exception as exc:  # health reports, it does not raise
            return {"state": "unknown", "error": f"{type(exc).__name__}: {exc}"}
        state = SyncState.load(build) if build else None
        if build is None or state is None:
            return {"state": "missing", "error": self.last_error}
        return {
            "state": "ready",
            "docs": state.docs,
            "built_at": _iso(state.built_at),
            "synced_at": _iso(state.synced_at),
            "last_change": state.last_change,
            "path": str(build),
            "error": self.last_error,
        }


def _iso(when: float) -> str:
    return datetime.fromtimestamp(when, UTC).isoformat(timespec="seconds")
