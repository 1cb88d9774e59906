"""The evaluation forum of related topics: a copy of a dump with each query added as a topic.

Qatar Living's judgements say which of the forum's questions are related to a question (SemEval
2016 task 3, question to question): asked as a topic of its own, a query's related list can be
scored against them. Each query becomes a public topic (its subject as title, its body as the
opening post, no reply) in a category of its own ("Questions": a name that says nothing of the
subject, so no judged topic's category leaks into the query's text).

The copy is a new evaluation state (its own database, :mod:`sidecar.evaluation.state`). When the
original dump's state exists, the copy starts as a template copy of its database, so only the
query topics are embedded (the digests of the rest are unchanged); its keyword index gets a
name of its own, since a copy would otherwise share the original's folder.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.rows import dict_row

from sidecar.config.settings import Settings
from sidecar.db.meta import copy_database, database_exists, set_meta
from sidecar.db.schema import with_search_path
from sidecar.evaluation.dataset import EvalQuery, forum_digest
from sidecar.evaluation.state import database_name
from sidecar.ingest.importer import FILES
from sidecar.runtime.services import embedded_postgres_url

log = logging.getLogger(__name__)

CATEGORY_NAME = "Questions"
EXTERNAL_PREFIX = "query:"
CREATED_AT = "2016-06-01T00:00:00Z"  # after every question of the dump
COPY_TRIES = 6  # a template copy waits while another session reads the original


@dataclass(frozen=True)
class RelatedDump:
    """The copy's folder and the topic each query became."""

    directory: Path
    topics: dict[str, int]  # query id -> topic id

    @property
    def query_topics(self) -> frozenset[int]:
        """Every query's topic (left out of every list but as the asked topic)."""
        return frozenset(self.topics.values())


def _max_id(path: Path, key: str = "id") -> int:
    with path.open(encoding="utf-8") as handle:
        return max((int(json.loads(line)[key] or 0) for line in handle if line.strip()),
                   default=0)


def _rows(queries: list[EvalQuery], topic_base: int, post_base: int, user_id: int,
          category: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    topics, posts = [], []
    for i, q in enumerate(queries, start=1):
        title = " ".join(q.text.split())[:1000]
        body = (q.details or "").strip() or title
        topics.append({"id": topic_base + i, "title": title, "slug": None,
                       "category_id": category, "archetype": "regular", "visible": True,
                       "closed": False, "archived": False, "deleted_at": None,
                       "created_at": CREATED_AT, "posts_count": 1, "tags": [],
                       "external_id": EXTERNAL_PREFIX + q.id})
        posts.append({"id": post_base + i, "topic_id": topic_base + i, "post_number": 1,
                      "user_id": user_id, "username": "asker", "created_at": CREATED_AT,
                      "raw": body, "reply_to_post_number": None, "post_type": 1,
                      "hidden": False, "deleted_at": None,
                      "external_id": EXTERNAL_PREFIX + q.id})
    return topics, posts


def write_related_dump(dump: Path, queries: list[EvalQuery], root: Path) -> RelatedDump:
    """Write (once) the copy of ``dump`` with ``queries`` as topics under ``root``."""
    topic_base = _max_id(dump / "topics.jsonl")
    post_base = _max_id(dump / "posts.jsonl")
    user_id = _max_id(dump / "posts.jsonl", "user_id") + 1
    category = _max_id(dump / "categories.jsonl") + 1
    topics, posts = _rows(queries, topic_base, post_base, user_id, category)
    mapping = {q.id: t["id"] for q, t in zip(queries, topics, strict=True)}
    tag = f"{dump.name}-{forum_digest(dump)[:12]}-{len(queries)}"
    out = root / tag
    if (out / "topics.jsonl").is_file():
        return RelatedDump(out, mapping)
    work = root / f".{tag}.{uuid.uuid4().hex[:8]}"
    work.mkdir(parents=True)
    for name in FILES:
        shutil.copyfile(dump / name, work / name)
    extra = {"categories.jsonl": [{"id": category, "name": CATEGORY_NAME,
                                   "slug": CATEGORY_NAME.lower(), "read_restricted": False}],
             "topics.jsonl": topics, "posts.jsonl": posts}
    for name, rows in extra.items():
        with (work / name).open("a", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row) + "\n")
    work.rename(out)
    return RelatedDump(out, mapping)


def seed_from_original(settings: Settings, original: Path, copy: Path) -> str:
    """Start the copy's database as a template copy of the original's evaluation database
    (when that exists and the copy does not): what happened, in words."""
    if settings.database_url is not None:
        return "DATABASE_URL is set: the copy is imported and embedded in full"
    admin = embedded_postgres_url(settings.state_dir / "eval", settings.embedded_pg_shared_buffers)
    source = database_name(forum_digest(original), settings.ts_config)
    target = database_name(forum_digest(copy), settings.ts_config)
    with psycopg.connect(admin, autocommit=True) as conn:
        if database_exists(conn, target):
            return f"reused {target}"
        if not database_exists(conn, source):
            return f"no state of {original} yet: the copy is imported and embedded in full"
        for attempt in range(COPY_TRIES):
            try:
                copy_database(conn, target, source)
                break
            except psycopg.errors.ObjectInUse:
                log.info("%s is in use; waiting to copy it (%d/%d)", source, attempt + 1,
                         COPY_TRIES)
                time.sleep(10)
        else:
            return f"{source} stayed in use: the copy is imported and embedded in full"
    url = make_conninfo(admin, dbname=target)
    with psycopg.connect(with_search_path(url), row_factory=dict_row) as conn:
        # Its own keyword index folder: the original's must not follow the copy's changes.
        set_meta(conn, "keyword_index_id", str(uuid.uuid4()))
    return f"copied {source} into {target}"
