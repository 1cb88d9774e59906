"""Small builders for forum dumps written by tests, and how tests start `sidecar`."""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
from pathlib import Path
from types import ModuleType
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


def sidecar_command() -> list[str]:
    """The `sidecar` console script of this environment, as operators run it."""
    script = Path(sys.executable).with_name("sidecar")
    return [str(script)] if script.exists() else [sys.executable, "-m", "sidecar"]


def discourse_delivery(event: str, body: dict[str, Any], secret: str, event_id: int,
                       signature: str | None = None,
                       content_type: str = "application/json") -> tuple[bytes, dict[str, str]]:
    """The raw body and headers of one webhook delivery, as Discourse sends them."""
    raw = json.dumps(body).encode()
    digest = hmac.new(secret.encode(), raw, hashlib.sha256).hexdigest()
    headers = {
        "X-Discourse-Instance": "https://forum.example.org",
        "X-Discourse-Event-Id": str(event_id),
        "X-Discourse-Event-Type": event.partition("_")[0] if event != "ping" else "ping",
        "X-Discourse-Event": event,
        "X-Discourse-Event-Signature": signature if signature is not None else f"sha256={digest}",
        "User-Agent": "Discourse/3.5.0",
        "Content-Type": content_type,
    }
    return raw, headers


def add_post(database_url: str, topic_sql: str, raw: str) -> dict[str, Any]:
    """A new post with ``raw``: a copy of the last regular post of the topic ``topic_sql``
    selects, numbered after it (every other column as the forum has it)."""
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(database_url, row_factory=dict_row, autocommit=True) as conn:
        row = conn.execute(
            f"SELECT p.* FROM posts p WHERE p.topic_id = ({topic_sql}) AND p.deleted_at IS NULL"
            " AND p.post_type = 1 AND NOT p.hidden ORDER BY p.post_number DESC LIMIT 1"
        ).fetchone()
        top = conn.execute("SELECT max(id) AS id FROM posts").fetchone()
        assert row is not None and top is not None
        row.update(id=top["id"] + 1, post_number=row["post_number"] + 1, raw=raw,
                   cooked=f"<p>{raw}</p>")
        conn.execute(f"INSERT INTO posts ({', '.join(row)}) VALUES "  # type: ignore[arg-type]
                     f"({', '.join(['%s'] * len(row))})", list(row.values()))
    return row


def demo_queries() -> list[dict[str, Any]]:
    """The demo forum's questions (sidecar/demo/queries.jsonl: text, lang, kind, expected topic)."""
    from sidecar.runtime.bootstrap import demo_dir

    path = demo_dir() / "queries.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


REPO = Path(__file__).resolve().parents[1]


def load_script(name: str) -> ModuleType:
    """A lint script of ``scripts/`` (``check_sql``, ``check_imports``) loaded as a module."""
    import importlib.util  # only the lint-rule tests load scripts

    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_tiny_encoder(out: Path) -> Path:
    """A 2-layer, 32-wide BERT encoder checkpoint over MiniLM's vocabulary in ``out`` (an init
    that trains in seconds; needs transformers, the train extra)."""
    import shutil

    import transformers

    from models.presets import minilm_dir
    from models.tiny import tiny_bert_config

    config = transformers.BertConfig(**tiny_bert_config(classifier=False))
    transformers.BertModel(config).save_pretrained(out)
    for name in ("tokenizer.json", "tokenizer_config.json", "vocab.txt",
                 "special_tokens_map.json"):
        shutil.copy2(minilm_dir() / name, out / name)
    return out


def add_members(conn: Any, user_ids: tuple[int, ...]) -> None:
    """Signed-in members (not staff), as Discourse's ``users`` rows (``conn``: the forum's
    owner): a search-log click counts by its member, logged-out visitors all as one."""
    for uid in user_ids:
        conn.execute(
            "INSERT INTO users (id, username, username_lower, admin, moderator, created_at,"
            " updated_at) VALUES (%s, %s, %s, false, false, now(), now())"
            " ON CONFLICT (id) DO NOTHING", (uid, f"m{uid}", f"m{uid}"))
