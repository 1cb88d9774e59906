"""The keyword index on a node's disk: Tantivy, one document per public post.

Each document holds the post's lexemes exactly as PostgreSQL made them for
``post_search_data.search_data`` (same stems, stop words and positions), one field per weight:
title (A), category (B), tags (C), body (D). BM25 is Tantivy's, so its statistics (document
count, document frequencies, field lengths) are those of the indexed, public posts only.

On disk, under ``<state_dir>/keyword/<index id>/``: one folder per build (``g-…``), the file
``current`` naming the live one (replaced atomically by a rebuild), ``sync.lock`` (one writer per
node) and, in each build folder, ``sidecar-sync.json`` (how far the change log was applied).
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import tantivy

from sidecar.core.tsvector import FIELDS, field_tokens

# Bumped when the documents change shape: a node whose index is older rebuilds it (2: tags
# anyone may not see are left out).
SCHEMA_VERSION = 2
TEXT_FIELDS: tuple[str, ...] = tuple(FIELDS.values())
# How much one occurrence counts in each field (BM25 per field, summed): Discourse's weights,
# title above body, the category's name below.
FIELD_BOOSTS: dict[str, float] = {"title": 2.0, "category": 0.5, "tags": 1.0, "body": 1.0}
STATE_FILE = "sidecar-sync.json"
WRITER_HEAP = 64_000_000  # bytes Tantivy buffers before it writes a segment
# A rebuild's budget, one thread: the whole index of a forum of about a million posts is one
# segment, which a search reads about 1.4x faster than the 7 of a 2-thread 64 MB build (500k
# documents of the mail forum, Tantivy alone: p95 8.8 -> 6.3 ms, docs/keyword.md). A budget,
# not an allocation: Tantivy's arena grows by pages as documents come.
BUILD_HEAP = 1_500_000_000


def schema() -> tantivy.Schema:
    """post_id (an i64: Tantivy deletes by term only on signed ints) and the four text fields."""
    builder = tantivy.SchemaBuilder()
    builder.add_integer_field("post_id", indexed=True, fast=True)
    for name in TEXT_FIELDS:
        # Tokens arrive pre-tokenized; "raw" is what a query term is compared with as is.
        builder.add_text_field(name, tokenizer_name="raw", index_option="position")
    return builder.build()


def make_document(post_id: int, search_data: str) -> tantivy.Document | None:
    """The document of a post from its search data as text; None when it holds no lexeme."""
    fields = field_tokens(search_data)
    if not fields:
        return None
    doc = tantivy.Document()
    doc.add_integer("post_id", post_id)
    for name, tokens in fields.items():
        doc.add_pre_tokenized_text(name, tantivy.PreTokenizedString(
            "", [tantivy.Token(lexeme, position, 0, 0) for position, lexeme in tokens]))
    return doc


@dataclass
class SyncState:
    """What a build folder holds: built when, synced when, up to which change-log id."""

    schema: int
    last_change: int
    built_at: float
    synced_at: float
    docs: int = 0

    def save(self, folder: Path) -> None:
        """Write atomically (a reader never sees half a file)."""
        tmp = folder / f".{STATE_FILE}.{os.getpid()}"
        tmp.write_text(json.dumps(asdict(self)), encoding="utf-8")
        os.replace(tmp, folder / STATE_FILE)

    @classmethod
    def load(cls, folder: Path) -> SyncState | None:
        """The saved state, or None when the folder has none (an unfinished build)."""
        try:
            return cls(**json.loads((folder / STATE_FILE).read_text(encoding="utf-8")))
        except (OSError, ValueError, TypeError):
            return None


class IndexFolder:
    """The folders of one database's keyword index on this node."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.lock_path = root / "sync.lock"

    def current(self) -> Path | None:
        """The live build folder, or None when none was finished."""
        try:
            name = (self.root / "current").read_text(encoding="utf-8").strip()
        except OSError:
            return None
        folder = self.root / name
        return folder if name and folder.is_dir() else None

    def new_build(self) -> Path:
        """An empty folder for a new build."""
        folder = self.root / f"g-{time.strftime('%Y%m%d%H%M%S')}-{uuid.uuid4().hex[:6]}"
        folder.mkdir(parents=True)
        return folder

    def switch(self, folder: Path) -> None:
        """Make ``folder`` the live build, then delete builds older than the previous one.

        The previous build is kept: another process of this node may still be reading it
        until it notices the switch.
        """
        previous = self.current()
        tmp = self.root / f".current.{os.getpid()}"
        tmp.write_text(folder.name, encoding="utf-8")
        os.replace(tmp, self.root / "current")
        keep = {folder.name, previous.name if previous else ""}
        for old in self.root.glob("g-*"):
            if old.name not in keep:
                shutil.rmtree(old, ignore_errors=True)


def open_index(folder: Path) -> tantivy.Index:
    """Open (or create, in an empty folder) the Tantivy index of a build folder."""
    index = tantivy.Index(schema(), path=str(folder), reuse=True)
    return index


class Writer:
    """Adds, replaces and deletes documents of one build, then commits (single writer)."""

    def __init__(self, index: tantivy.Index, threads: int = 1, heap: int = WRITER_HEAP) -> None:
        self._writer = index.writer(heap_size=heap, num_threads=threads)
        self.added = 0
        self.deleted = 0

    def delete(self, post_ids: Iterable[int]) -> None:
        """Remove these posts' documents (absent ones are ignored)."""
        for post_id in post_ids:
            self._writer.delete_documents_by_term("post_id", post_id)
            self.deleted += 1

    def add(self, documents: Iterable[tuple[int, str]]) -> None:
        """Add documents from (post id, search data as text); delete the old ones first."""
        for post_id, search_data in documents:
            doc = make_document(post_id, search_data)
            if doc is not None:
                self._writer.add_document(doc)
                self.added += 1

    def commit(self) -> None:
        """Make the changes visible to readers (after their next reload)."""
        self._writer.commit()

    def close(self) -> None:
        """Wait for background merges and release Tantivy's writer lock."""
        self._writer.wait_merging_threads()
        del self._writer
