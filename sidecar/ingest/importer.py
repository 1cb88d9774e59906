"""`sidecar import DIR`: load a forum dump into a database the sidecar owns.

Idempotent (rows are upserted, and a row whose content did not change is not touched, so its
``updated_at`` stays put and nothing is re-embedded), validating (every bad row is reported with
its file and line while the good ones load), and it fills ``post_search_data`` as Discourse would.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from sidecar.core.text import cook, html_to_text
from sidecar.db import forum_write, keyword_sql, solved
from sidecar.db.forum_read import Visibility, existing_ids, visibility
from sidecar.db.migrate import forum_owned
from sidecar.db.schema import search_own_schema
from sidecar.dump_format import CategoryRow, PostRow, RowError, RowT, TopicRow, read_rows
from sidecar.errors import ConfigurationError, InvalidInput

log = logging.getLogger(__name__)

FILES = ("categories.jsonl", "topics.jsonl", "posts.jsonl")


@dataclass
class EntityCount:
    """What happened to the rows of one file."""

    read: int = 0
    inserted: int = 0
    updated: int = 0
    rejected: int = 0

    @property
    def unchanged(self) -> int:
        """Valid rows already present with the same content."""
        return self.read - self.rejected - self.inserted - self.updated


@dataclass
class ImportReport:
    """Counts per file, every rejected row, and how many loaded posts are public."""

    categories: EntityCount = field(default_factory=EntityCount)
    topics: EntityCount = field(default_factory=EntityCount)
    posts: EntityCount = field(default_factory=EntityCount)
    errors: list[RowError] = field(default_factory=list)
    visibility: Visibility = field(default_factory=Visibility)
    # Rows loaded with a part ignored (an accepted answer that is not a post of its topic).
    warnings: list[RowError] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        """JSON-friendly form for the CLI."""
        out: dict[str, object] = {}
        for name in ("categories", "topics", "posts"):
            c: EntityCount = getattr(self, name)
            out[name] = {"read": c.read, "inserted": c.inserted, "updated": c.updated,
                         "unchanged": c.unchanged, "rejected": c.rejected}
        out["visibility"] = asdict(self.visibility)
        out["errors"] = [str(e) for e in self.errors]
        out["warnings"] = [str(e) for e in self.warnings]
        return out


def _dedupe(
    rows: Iterable[tuple[int, RowT]],
    key: Callable[[RowT], object],
    what: str,
    file: str,
    errors: list[RowError],
) -> list[tuple[int, RowT]]:
    """Keep the first row of each key; later ones are rejected with a pointer to the first."""
    seen: dict[object, int] = {}
    kept = []
    for line, row in rows:
        value = key(row)
        if value in seen:
            errors.append(
                RowError(file, line, f"duplicate {what} {value} (first at line {seen[value]})")
            )
            continue
        seen[value] = line
        kept.append((line, row))
    return kept


def import_dump(conn: psycopg.Connection[Any], directory: Path, ts_config: str) -> ImportReport:
    """Validate and load a dump directory; the caller's transaction commits it."""
    search_own_schema(conn)  # its change log and meta, whatever connection the caller opened
    if not forum_owned(conn):
        raise ConfigurationError(
            "refusing to import: this database's forum tables belong to a real forum, "
            "not to the sidecar (import only into the embedded or a dedicated database)"
        )
    missing = [name for name in FILES if not (directory / name).is_file()]
    if missing:
        raise InvalidInput(f"{directory} is not a forum dump: missing {', '.join(missing)}")
    report = ImportReport()
    errs = report.errors

    cats = _dedupe(read_rows(directory / "categories.jsonl", CategoryRow, errs),
                   lambda c: c.id, "id", "categories.jsonl", errs)
    cats = _dedupe(cats, lambda c: (c.parent_category_id, c.name.casefold()), "name",
                   "categories.jsonl", errs)
    topics = _dedupe(read_rows(directory / "topics.jsonl", TopicRow, errs),
                     lambda t: t.id, "id", "topics.jsonl", errs)
    posts = _dedupe(read_rows(directory / "posts.jsonl", PostRow, errs),
                    lambda p: p.id, "id", "posts.jsonl", errs)
    posts = _dedupe(posts, lambda p: (p.topic_id, p.post_number), "(topic_id, post_number)",
                    "posts.jsonl", errs)

    known_cats = existing_ids(conn, "categories") | {c.id for _, c in cats}
    good_topics = []
    for line, t in topics:
        if t.category_id is not None and t.category_id not in known_cats:
            errs.append(RowError("topics.jsonl", line, f"unknown category_id {t.category_id}"))
        else:
            good_topics.append((line, t))
    known_topics = existing_ids(conn, "topics") | {t.id for _, t in good_topics}
    good_posts = []
    for line, p in posts:
        if p.topic_id not in known_topics:
            errs.append(RowError("posts.jsonl", line, f"unknown topic_id {p.topic_id}"))
        else:
            good_posts.append((line, p))

    for name in ("categories", "topics", "posts"):
        getattr(report, name).read = _count_lines(directory / f"{name}.jsonl")

    report.categories.inserted, report.categories.updated = forum_write.upsert_categories(
        conn, [c for _, c in cats])
    report.topics.inserted, report.topics.updated = forum_write.upsert_topics(
        conn, [t for _, t in good_topics])
    clashes = forum_write.post_number_clashes(conn, good_posts)
    for line, message in clashes:
        errs.append(RowError("posts.jsonl", line, message))
    clash_lines = {line for line, _ in clashes}
    loadable: Sequence[PostRow] = [p for line, p in good_posts if line not in clash_lines]
    cooked = [cook(p.raw) for p in loadable]
    texts = [html_to_text(c) for c in cooked]
    report.posts.inserted, report.posts.updated = forum_write.upsert_posts(conn, loadable, cooked)
    forum_write.upsert_users(conn, loadable)
    touched = {t.id for _, t in good_topics} | {p.topic_id for p in loadable}
    forum_write.refresh_topic_stats(conn, touched)
    for line, message in solved.replace_accepted_answers(conn, good_topics):
        report.warnings.append(RowError("topics.jsonl", line, message))
    forum_write.replace_search_data(
        conn, loadable, texts, ts_config,
        touched_topics={t.id for _, t in good_topics},
    )
    # What changed (updated_at moved) goes to the keyword change log that every node applies.
    keyword_sql.catch_up(conn)
    forum_write.analyze_imported(conn)
    report.visibility = visibility(conn, [p.id for p in loadable])
    for file, count in (("categories.jsonl", report.categories), ("topics.jsonl", report.topics),
                        ("posts.jsonl", report.posts)):
        count.rejected = sum(1 for e in errs if e.file == file)
    errs.sort(key=lambda e: (FILES.index(e.file), e.line))
    log.debug("import of %s: %s", directory, report.as_dict())
    return report


def _count_lines(path: Path) -> int:
    with path.open(encoding="utf-8") as handle:
        return sum(1 for line in handle if line.strip())
