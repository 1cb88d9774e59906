"""Small builders for forum dumps written by tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_jsonl(path: Path, rows: list[Any]) -> None:
    """One JSON value per line (strings are written as-is, to inject broken lines)."""
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write((row if isinstance(row, str) else json.dumps(row)) + "\n")


def category(id: int, name: str, restricted: bool = False, **extra: Any) -> dict[str, Any]:
    return {"id": id, "name": name, "slug": name.lower().replace(" ", "-"),
            "read_restricted": restricted, **extra}


def topic(id: int, title: str, category_id: int | None, **extra: Any) -> dict[str, Any]:
    row = {"id": id, "title": title, "slug": None, "category_id": category_id,
           "archetype": "regular", "visible": True, "closed": False, "archived": False,
           "deleted_at": None, "created_at": "2026-01-02T10:00:00Z", "posts_count": 1,
           "tags": [], "external_id": None}
    row.update(extra)
    return row


def post(id: int, topic_id: int, number: int, raw: str, **extra: Any) -> dict[str, Any]:
    row = {"id": id, "topic_id": topic_id, "post_number": number, "user_id": 1,
           "username": "alice", "created_at": f"2026-01-02T10:{number:02d}:00Z", "raw": raw,
           "reply_to_post_number": None, "post_type": 1, "hidden": False, "deleted_at": None,
           "external_id": None}
    row.update(extra)
    return row


def write_dump(directory: Path, categories: list[Any], topics: list[Any],
               posts: list[Any]) -> Path:
    """A dump directory in the format `sidecar import` reads."""
    directory.mkdir(parents=True, exist_ok=True)
    write_jsonl(directory / "categories.jsonl", categories)
    write_jsonl(directory / "topics.jsonl", topics)
    write_jsonl(directory / "posts.jsonl", posts)
    return directory


def demo_queries() -> list[dict[str, Any]]:
    """The demo forum's questions (sidecar/demo/queries.jsonl: text, lang, kind, expected topic)."""
    from sidecar.bootstrap import demo_dir

    path = demo_dir() / "queries.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
