"""An evaluation dump: the forum (categories/topics/posts JSONL), queries and graded qrels.

The format is the one of ``../shared/eval/README.md``: ``queries.jsonl`` (id, text, ...), and
``qrels_topic.tsv`` / ``qrels_post.tsv`` (a header line, then ``query_id  doc_id  grade``).
Every problem is reported with its file and line, and raised as one :class:`InvalidInput`.
"""

from __future__ import annotations

import csv
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from sidecar.errors import InvalidInput
from sidecar.ingest.importer import FILES as FORUM_FILES

QUERIES_FILE = "queries.jsonl"
QRELS_TOPIC_FILE = "qrels_topic.tsv"
QRELS_POST_FILE = "qrels_post.tsv"
MAX_ERRORS_SHOWN = 10


class QueryRow(BaseModel):
    """One line of queries.jsonl (other fields, e.g. subject/body/split, are kept aside)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    id: str = Field(min_length=1)
    text: str = Field(min_length=1)
    details: str | None = None
    split: str | None = None


@dataclass(frozen=True)
class EvalQuery:
    """A query with its judgements."""

    id: str
    text: str
    split: str | None
    topics: Mapping[int, int]  # topic id -> grade (only judged topics)
    details: str | None = None  # the rest of the question, when text is its title
    posts: Mapping[int, int] = field(default_factory=dict)  # post id -> grade

    def has_relevant_topic(self, min_grade: int = 1) -> bool:
        """True when at least one judged topic is relevant."""
        return any(g >= min_grade for g in self.topics.values())


@dataclass(frozen=True)
class EvalDataset:
    """Queries in file order, each with its topic and post judgements."""

    directory: Path
    queries: tuple[EvalQuery, ...]
    has_post_qrels: bool

    def scored(self, min_grade: int = 1) -> list[EvalQuery]:
        """The queries the metrics average over: those with at least one relevant topic."""
        return [q for q in self.queries if q.has_relevant_topic(min_grade)]

    @property
    def has_details(self) -> bool:
        """Whether its questions come with details (read with ``--query title+body``)."""
        return any(q.details for q in self.queries)


def _read_qrels(path: Path, errors: list[str]) -> dict[str, dict[int, int]]:
    out: dict[str, dict[int, int]] = {}
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.reader(handle, delimiter="\t")
        for line, row in enumerate(reader, start=1):
            if line == 1 or not row or not "".join(row).strip():
                continue  # the header, blank lines
            if len(row) != 3:
                errors.append(f"{path.name}:{line}: expected 3 tab-separated columns")
                continue
            qid, doc, grade = (cell.strip() for cell in row)
            try:
                doc_id, value = int(doc), int(grade)
            except ValueError:
                errors.append(f"{path.name}:{line}: id and grade must be integers")
                continue
            if value < 0:
                errors.append(f"{path.name}:{line}: grade must be >= 0")
                continue
            judged = out.setdefault(qid, {})
            if doc_id in judged and judged[doc_id] != value:
                errors.append(f"{path.name}:{line}: {qid}/{doc_id} judged twice, differently")
                continue
            judged[doc_id] = value
    return out


def parse_query_fields(spec: str) -> tuple[str, str | None]:
    """``"text"`` -> ("text", None); ``"subject+body"`` -> ("subject", "body")."""
    query, sep, details = spec.partition("+")
    if not query.strip() or (sep and not details.strip()):
        raise InvalidInput(f"--query: expected FIELD or FIELD+DETAILS_FIELD, got {spec!r}")
    return query.strip(), (details.strip() or None)


def _read_queries(path: Path, errors: list[str], spec: str = "text") -> list[QueryRow]:
    field, details_field = parse_query_fields(spec)
    rows: list[QueryRow] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as handle:
        for line, text in enumerate(handle, start=1):
            if not text.strip():
                continue
            try:
                data = json.loads(text)
                if isinstance(data, dict):
                    # Other fields of the line may be the query (e.g. a question's subject) and
                    # its details (the question's body).
                    data["text"] = data.get(field)
                    data["details"] = data.get(details_field) if details_field else None
                row = QueryRow.model_validate(data)
            except (json.JSONDecodeError, ValidationError) as exc:
                errors.append(f"{path.name}:{line}: {str(exc).splitlines()[0]}")
                continue
            if row.id in seen:
                errors.append(f"{path.name}:{line}: duplicate query id {row.id}")
                continue
            seen.add(row.id)
            rows.append(row)
    return rows


def load_dataset(directory: Path, query_fields: str = "text") -> EvalDataset:
    """Read and check queries and qrels (the forum files are checked by the importer).

    ``query_fields`` names the field of queries.jsonl that holds the query (``text`` by
    default; e.g. ``subject`` for short, search-box-like queries), optionally ``+`` the field
    holding its details (``subject+body``: the question as a topic has it, a title and a body).
    """
    needed = [*FORUM_FILES, QUERIES_FILE, QRELS_TOPIC_FILE]
    missing = [name for name in needed if not (directory / name).is_file()]
    if missing:
        raise InvalidInput(f"{directory} is not an evaluation dump: missing {', '.join(missing)}")
    errors: list[str] = []
    rows = _read_queries(directory / QUERIES_FILE, errors, query_fields)
    topic_qrels = _read_qrels(directory / QRELS_TOPIC_FILE, errors)
    post_path = directory / QRELS_POST_FILE
    post_qrels = _read_qrels(post_path, errors) if post_path.is_file() else {}
    known = {r.id for r in rows}
    for name, qrels in ((QRELS_TOPIC_FILE, topic_qrels), (QRELS_POST_FILE, post_qrels)):
        unknown = sorted(set(qrels) - known)
        if unknown:
            errors.append(f"{name}: judgements for unknown queries {', '.join(unknown[:5])}")
    if errors:
        shown = "; ".join(errors[:MAX_ERRORS_SHOWN])
        extra = len(errors) - MAX_ERRORS_SHOWN
        more = f" (and {extra} more)" if extra > 0 else ""
        raise InvalidInput(f"invalid evaluation dump {directory}: {shown}{more}",
                           details=errors)
    queries = tuple(
        EvalQuery(id=r.id, text=r.text, split=r.split, topics=topic_qrels.get(r.id, {}),
                  posts=post_qrels.get(r.id, {}), details=r.details)
        for r in rows
    )
    if not any(q.has_relevant_topic() for q in queries):
        raise InvalidInput(f"{directory}: no query has a relevant topic (grade >= 1)")
    return EvalDataset(directory=directory, queries=queries, has_post_qrels=bool(post_qrels))


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes."""
    h = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def files_digest(directory: Path, names: tuple[str, ...]) -> str:
    """sha256 over the names and contents of the given files (those present)."""
    h = hashlib.sha256()
    for name in names:
        path = directory / name
        if path.is_file():
            h.update(f"{name}\0{file_digest(path)}\0".encode())
    return h.hexdigest()


def forum_digest(directory: Path) -> str:
    """Fingerprint of the forum part of a dump (what the import reads)."""
    return files_digest(directory, FORUM_FILES)


def judgements_digest(directory: Path) -> str:
    """Fingerprint of the queries and judgements (recorded in the results, not in the state)."""
    return files_digest(directory, (QUERIES_FILE, QRELS_TOPIC_FILE, QRELS_POST_FILE))
