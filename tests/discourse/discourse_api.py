"""The runner's ``discourse`` object: what each call answers, over :class:`Forum`.

Shapes and errors follow ``tool_runner/discourse.rb``: reads answer null (or ``[]``) for what
their Guardian may not see, and ``{"__discourse_read_error": ...}`` for a bad option; writes
answer ``{"error": ...}``, which the JavaScript wrappers throw.
"""

from __future__ import annotations

import html
import re
from typing import Any

from tests.discourse.forum import (
    CUSTOM_FIELDS,
    MAX_TOPIC_POSTS,
    READ_ERROR,
    SYSTEM_USER_ID,
    Forum,
    ReadError,
)

SCOPE = {"as_user_id", "as_username"}
MAX_KEY, MAX_VALUE = 256, 1024
FILTERS = {"category", "status", "order"}  # the topic filters read; any other one throws


def _reads(method: Any) -> Any:
    """A read: a bad option becomes the runner's read-error answer."""
    def read(self: DiscourseApi, *args: Any) -> Any:
        try:
            return method(self, *args)
        except ReadError as error:
            return {READ_ERROR: str(error)}
    return read


class DiscourseApi:
    """``discourse.*`` of one tool run; ``created`` lists the posts it wrote."""

    def __init__(self, forum: Forum) -> None:
        self.forum = forum
        self.created: list[dict[str, Any]] = []

    @_reads
    def get_post(self, post_id: Any, options: Any = None) -> dict[str, Any] | None:
        reader = self.forum.scope(options, SCOPE)
        rows = self.forum._visible_posts(reader, "p.id = %s", int(post_id))
        topic = self.forum.topic(rows[0]["topic_id"]) if rows else None
        if topic is None or not self.forum.can_see_topic(reader, topic):
            return None
        return self.forum.post_json(rows[0], topic, reader)

    @_reads
    def get_topic(self, topic_id: Any, options: Any = None) -> dict[str, Any] | None:
        reader = self.forum.scope(options, SCOPE)
        topic = self.forum.topic(topic_id)
        if topic is None or not self.forum.can_see_topic(reader, topic):
            return None
        return self.forum.topic_json(topic, full=True)

    @_reads
    def get_topic_posts(self, topic_id: Any, options: Any = None) -> list[dict[str, Any]]:
        reader = self.forum.scope(options, SCOPE | {"limit", "post_numbers"})
        options = options or {}
        topic = self.forum.topic(topic_id)
        if topic is None or not self.forum.can_see_topic(reader, topic):
            return []
        if "post_numbers" in options:
            numbers = options["post_numbers"]
            if "limit" in options:
                raise ReadError("limit and post_numbers cannot be used together")
            if not isinstance(numbers, list):
                raise ReadError("post_numbers must be an array")
            if len(numbers) > MAX_TOPIC_POSTS:
                raise ReadError(f"post_numbers cannot exceed {MAX_TOPIC_POSTS} entries")
            if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in numbers):
                raise ReadError("post_numbers must contain positive integers")
            posts = self.forum._visible_posts(reader, "p.topic_id = %s AND p.post_number = ANY(%s)",
                                              topic["id"], sorted(set(numbers)))
        else:
            limit = options.get("limit", MAX_TOPIC_POSTS)
            if not isinstance(limit, int) or isinstance(limit, bool) or limit <= 0:
                raise ReadError("limit must be a positive integer")
            posts = self.forum._visible_posts(reader, "p.topic_id = %s",
                                              topic["id"])[:min(limit, MAX_TOPIC_POSTS)]
        return [self.forum.post_json(p, topic, reader) for p in posts]

    @_reads
    def filter_topics(self, params: Any) -> dict[str, Any]:
        """TopicQuery#list_filter: regular topics the scope may list, newest activity first."""
        reader = self.forum.scope(params, {"q", "limit", "page", "with_private"} | SCOPE,
                                  default=None)
        query = str((params or {}).get("q") or "")
        if not query.strip():
            raise ReadError("Missing required parameter: q")
        topics = self.forum.sql("""SELECT * FROM topics WHERE archetype = 'regular'
                                   AND deleted_at IS NULL ORDER BY bumped_at DESC, id DESC""")
        staff = reader == SYSTEM_USER_ID or self.forum._is_admin(reader)
        topics = [t for t in topics if (staff or t["visible"])
                  and self.forum.can_see_topic(reader, t)]
        for key, value in re.findall(r"(?:^|\s)([\w-]+):(\S+)", query):
            if key not in FILTERS:
                raise ReadError(f"harness: topic filter {key!r} is not implemented")
            if key == "category":
                ids = self._category_ids(value.split(","), reader)
                topics = [t for t in topics if t["category_id"] in ids]
            elif key == "status":
                topics = [t for t in topics if self._status(t, value)]
        limit = min(int((params or {}).get("limit") or 30), 100)
        page = int((params or {}).get("page") or 0)
        chosen = topics[page * limit:(page + 1) * limit]
        return {"query": query, "page": page, "limit": limit,
                "topics": [self.forum.topic_json(t, full=True) for t in chosen]}

    def _category_ids(self, slugs: list[str], reader: int | None) -> set[int]:
        rows = self.forum.sql("SELECT id, parent_category_id, read_restricted, slug"
                              " FROM categories")
        seen = {r["id"] for r in rows
                if not r["read_restricted"] or self.forum._is_admin(reader)}
        ids = {r["id"] for r in rows if r["slug"] in slugs and r["id"] in seen}
        return ids | {r["id"] for r in rows if r["parent_category_id"] in ids}

    def _status(self, topic: dict[str, Any], status: str) -> bool:
        if status == "public":
            rows = self.forum.sql("SELECT read_restricted FROM categories WHERE id = %s",
                                  topic["category_id"])
            return bool(rows) and not rows[0]["read_restricted"]
        flags = {"open": not topic["closed"] and not topic["archived"], "closed": topic["closed"],
                 "archived": topic["archived"], "listed": topic["visible"],
                 "unlisted": not topic["visible"]}
        if status not in flags:
            raise ReadError(f"harness: status {status!r} is not implemented")
        return bool(flags[status])

    def create_post(self, params: dict[str, Any]) -> dict[str, Any]:
        """PostCreator as the bot (or ``username``): the next post number of the topic."""
        params = params or {}
        if not params.get("topic_id"):
            return {"error": "Missing required parameter: topic_id"}
        if not str(params.get("raw") or "").strip():
            return {"error": "Missing required parameter: raw"}
        if params.get("username"):
            rows = self.forum.sql("SELECT id FROM users WHERE username_lower = lower(%s)",
                                  params["username"])
            if not rows:
                return {"error": f"User not found: {params['username']}"}
            author = int(rows[0]["id"])
        else:
            author = self.forum.bot_user_id
        topic = self.forum.topic(params["topic_id"])
        if topic is None:
            return {"error": "Topic not found"}
        if not self.forum.can_see_topic(author, topic) or (
                not self.forum._is_admin(author) and (topic["closed"] or topic["archived"])):
            return {"error": "Permission denied"}
        raw = str(params["raw"])
        row = self.forum.sql("""
            INSERT INTO posts (id, user_id, topic_id, post_number, raw, cooked, created_at,
                               updated_at, last_version_at, reply_to_post_number)
            SELECT (SELECT coalesce(max(id), 0) + 1 FROM posts), %s, %s,
                   (SELECT coalesce(max(post_number), 0) + 1 FROM posts WHERE topic_id = %s),
                   %s, %s, now(), now(), now(), %s
            RETURNING id, post_number, cooked""", author, topic["id"], topic["id"], raw,
            f"<p>{html.escape(raw)}</p>", params.get("reply_to_post_number"))[0]
        self.forum.sql("""UPDATE topics SET posts_count = posts_count + 1,
                            reply_count = reply_count + (CASE WHEN %s > 1 THEN 1 ELSE 0 END),
                            highest_post_number = %s, last_posted_at = now(), bumped_at = now()
                          WHERE id = %s""", row["post_number"], row["post_number"], topic["id"])
        self.created.append({"topic_id": topic["id"], "user_id": author, "raw": raw,
                             "post_id": row["id"], "post_number": row["post_number"]})
        return {"success": True, "post_id": row["id"], "post_number": row["post_number"],
                "cooked": row["cooked"]}

    def _model(self, kind: str, model_id: Any) -> tuple[str, str] | None:
        table, column, models = CUSTOM_FIELDS[kind]
        found = self.forum.sql(f"SELECT 1 FROM {models} WHERE id = %s", int(model_id))
        return (table, column) if found else None

    def get_custom_field(self, kind: str, model_id: Any, key: str) -> Any:
        if kind not in CUSTOM_FIELDS:
            return {"error": f"Invalid type: {kind}"}
        found = self._model(kind, model_id)
        if found is None:
            return None
        rows = self.forum.sql(f"SELECT value FROM {found[0]} WHERE {found[1]} = %s AND name = %s"
                              " ORDER BY id", int(model_id), key)
        return rows[-1]["value"] if rows else None

    def set_custom_field(self, kind: str, model_id: Any, key: str, value: Any) -> dict[str, Any]:
        if kind not in CUSTOM_FIELDS:
            return {"error": f"Invalid type: {kind}"}
        if not key:
            return {"error": "Key is required"}
        if len(str(key)) > MAX_KEY:
            return {"error": f"Key too long (max {MAX_KEY} characters)"}
        if len(str(value)) > MAX_VALUE:
            return {"error": f"Value too long (max {MAX_VALUE} characters)"}
        found = self._model(kind, model_id)
        if found is None:
            return {"error": f"{kind.capitalize()} not found: {model_id}"}
        table, column = found
        self.forum.sql(f"DELETE FROM {table} WHERE {column} = %s AND name = %s", int(model_id), key)
        self.forum.sql(f"INSERT INTO {table} ({column}, name, value) VALUES (%s, %s, %s)",
                       int(model_id), key, str(value))
        return {"success": True, "key": key, "value": str(value)}
