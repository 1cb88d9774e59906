"""The forum dump format (../shared/eval/README.md): one validated model per JSONL row."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

PositiveId = Annotated[int, Field(gt=0, lt=2**31)]


def _naive_utc(value: datetime | None) -> datetime | None:
    # Discourse stores UTC in `timestamp without time zone` columns.
    if value is None or value.tzinfo is None:
        return value
    return value.astimezone(UTC).replace(tzinfo=None)


def slugify(title: str) -> str:
    """Discourse-like slug: ascii, lower case, words joined by dashes ('topic' when empty)."""
    ascii_title = unicodedata.normalize("NFKD", title).encode("ascii", "ignore").decode()
    slug = re.sub(r"[^a-z0-9]+", "-", ascii_title.lower()).strip("-")
    return slug[:100] or "topic"


class _Row(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=False, frozen=True)


class CategoryRow(_Row):
    """A row of categories.jsonl."""

    id: PositiveId
    name: str = Field(min_length=1, max_length=50)
    slug: str = Field(min_length=1, max_length=255)
    read_restricted: bool = False
    parent_category_id: PositiveId | None = None
    description: str | None = None
    # Optional: Discourse's search priority (0 normal, 1 ignore, 2 very low, 3 low, 4 high,
    # 5 very high; sidecar.core.chain.SearchPriority).
    search_priority: int = Field(default=0, ge=0, le=5)


class TopicRow(_Row):
    """A row of topics.jsonl."""

    id: PositiveId
    title: str = Field(min_length=1, max_length=1000)
    slug: str | None = None
    category_id: PositiveId | None = None
    archetype: Literal["regular", "private_message", "banner"] = "regular"
    visible: bool = True
    closed: bool = False
    archived: bool = False
    deleted_at: datetime | None = None
    created_at: datetime
    posts_count: int = Field(default=0, ge=0)
    tags: list[Annotated[str, Field(min_length=1, max_length=100)]] = Field(default_factory=list)
    external_id: str | None = None
    # Optional: the post marked as the solution (discourse-solved); a post of this topic.
    accepted_answer_post_id: PositiveId | None = None

    _utc = field_validator("deleted_at", "created_at")(_naive_utc)

    @model_validator(mode="after")
    def _category_rules(self) -> TopicRow:
        # The same CHECK constraints as Discourse's topics table.
        if self.archetype == "regular" and self.category_id is None:
            raise ValueError("a regular topic needs a category_id")
        if self.archetype == "private_message" and self.category_id is not None:
            raise ValueError("a private message has no category_id")
        return self

    @property
    def effective_slug(self) -> str:
        """The slug, derived from the title when the dump has none."""
        return self.slug or slugify(self.title)


class PostRow(_Row):
    """A row of posts.jsonl."""

    id: PositiveId
    topic_id: PositiveId
    post_number: PositiveId
    user_id: int | None = None
    username: str | None = Field(default=None, max_length=60)
    created_at: datetime
    updated_at: datetime | None = None
    raw: str = Field(max_length=200_000)
    reply_to_post_number: PositiveId | None = None
    post_type: Literal[1, 2, 3, 4] = 1
    hidden: bool = False
    deleted_at: datetime | None = None
    external_id: str | None = None
    like_count: int = Field(default=0, ge=0, lt=2**31)  # optional

    _utc = field_validator("deleted_at", "created_at", "updated_at")(_naive_utc)


RowT = TypeVar("RowT", bound=_Row)


@dataclass(frozen=True)
class RowError:
    """A rejected row: where it is and why."""

    file: str
    line: int
    error: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.error}"


def _describe(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False, include_input=False):
        where = ".".join(str(p) for p in err["loc"]) or "row"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def read_rows(
    path: Path, model: type[RowT], errors: list[RowError]
) -> Iterator[tuple[int, RowT]]:
    """Yield (line number, row) for each valid line; append a RowError for each invalid one."""
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                data: Any = json.loads(line)
            except json.JSONDecodeError as exc:
                errors.append(RowError(path.name, number, f"not JSON: {exc.msg}"))
                continue
            if not isinstance(data, dict):
                errors.append(RowError(path.name, number, "not a JSON object"))
                continue
            try:
                yield number, model.model_validate(data)
            except ValidationError as exc:
                errors.append(RowError(path.name, number, _describe(exc)))
