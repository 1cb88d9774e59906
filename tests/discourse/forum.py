"""The `discourse.*` reads and writes of discourse-ai's tool runner, over a forum's real tables.

Discourse answers these from ActiveRecord (``plugins/discourse-ai/lib/agents/tool_runner/
discourse.rb``); this answers them from the same tables of the demo forum, as their owner (the
writer a live forum has), with the visibility rules the runner applies:

* reads (``getPost``, ``getTopic``, ``getTopicPosts``) run as SystemUser unless ``as_user_id`` or
  ``as_username`` names a member, whose Guardian then decides: a PM only for its allowed users, a
  read-restricted category only for admins, deleted posts never, whispers for staff only, hidden
  posts for staff and their author; unknown or conflicting options throw;
* ``filterTopics`` lists what an anonymous visitor sees (no PM, no restricted category, no
  unlisted or deleted topic) unless a scope is given; only the filters the tools use are read,
  any other throws rather than being ignored;
* ``createPost`` writes a post as the bot (or a named user), numbered after the topic's last;
* custom fields live in ``topic_custom_fields``, ``post_custom_fields``, ``user_custom_fields``.

PM participants are ``topic_allowed_users`` rows, which :meth:`Forum.setup` fills from the PMs'
authors (the demo dump has no such table).
"""

from __future__ import annotations

import html
from datetime import UTC, datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

SYSTEM_USER_ID = -1
MAX_TOPIC_POSTS = 20
READ_ERROR = "__discourse_read_error"
CUSTOM_FIELDS = {"post": ("post_custom_fields", "post_id", "posts"),
                 "topic": ("topic_custom_fields", "topic_id", "topics"),
                 "user": ("user_custom_fields", "user_id", "users")}
SETUP_SQL = """
CREATE TABLE IF NOT EXISTS topic_allowed_users (
  id serial PRIMARY KEY, user_id integer NOT NULL, topic_id integer NOT NULL,
  created_at timestamp NOT NULL DEFAULT now(), updated_at timestamp NOT NULL DEFAULT now());
""" + "".join(f"""
CREATE TABLE IF NOT EXISTS {table} (
  id serial PRIMARY KEY, {column} integer NOT NULL, name varchar(256) NOT NULL, value text,
  created_at timestamp NOT NULL DEFAULT now(), updated_at timestamp NOT NULL DEFAULT now());
""" for table, column, _ in CUSTOM_FIELDS.values())


class ReadError(Exception):
    """A bad option: the runner answers ``{"__discourse_read_error": message}`` (JS throws)."""


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.replace(tzinfo=UTC).isoformat().replace("+00:00", "Z")


class Forum:
    """The forum's tables as the tool runner reads and writes them."""

    def __init__(self, owner_url: str, bot_user_id: int = SYSTEM_USER_ID) -> None:
        self.url = owner_url
        self.bot_user_id = bot_user_id

    def sql(self, query: str, *params: Any) -> list[dict[str, Any]]:
        """Rows of one statement (none for a write)."""
        with psycopg.connect(self.url, row_factory=dict_row, autocommit=True) as conn:
            cur = conn.execute(query, params)  # type: ignore[arg-type]
            return cur.fetchall() if cur.description else []

    def setup(self) -> None:
        """Discourse's tables the demo lacks, the system user, and each PM's participants."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(SETUP_SQL)  # type: ignore[arg-type]
        self.add_user(SYSTEM_USER_ID, "system", admin=True)
        self.sql("""INSERT INTO topic_allowed_users (user_id, topic_id)
                    SELECT DISTINCT p.user_id, p.topic_id FROM posts p JOIN topics t
                      ON t.id = p.topic_id AND t.archetype = 'private_message'
                    WHERE NOT EXISTS (SELECT 1 FROM topic_allowed_users a
                                      WHERE a.user_id = p.user_id AND a.topic_id = p.topic_id)""")

    def add_user(self, user_id: int, username: str, *, name: str | None = None,
                 admin: bool = False) -> None:
        """A user (idempotent): bots and the system user have negative ids, as in Discourse."""
        self.sql("""INSERT INTO users (id, username, username_lower, name, admin, created_at,
                                       updated_at) VALUES (%s, %s, %s, %s, %s, now(), now())
                    ON CONFLICT (id) DO NOTHING""",
                 user_id, username, username.lower(), name, admin)

    # --- who sees what ----------------------------------------------------------------------

    def _user(self, user_id: int) -> dict[str, Any] | None:
        rows = self.sql("SELECT * FROM users WHERE id = %s", user_id)
        return rows[0] if rows else None

    def scope(self, options: dict[str, Any] | None, allowed: set[str],
              default: int | None = SYSTEM_USER_ID) -> int | None:
        """The user whose Guardian reads (None: anonymous), from the read options."""
        options = options or {}
        if not isinstance(options, dict):
            raise ReadError("options must be an object")
        unknown = sorted(set(options) - allowed)
        if unknown:
            raise ReadError(f"Unsupported option(s): {', '.join(unknown)}")
        if "as_user_id" in options and "as_username" in options:
            raise ReadError("as_username and as_user_id cannot be used together")
        if options.get("with_private") and ({"as_user_id", "as_username"} & set(options)):
            raise ReadError("with_private cannot be used with as_username or as_user_id")
        if options.get("with_private"):
            return SYSTEM_USER_ID
        if "as_username" in options:
            rows = self.sql("SELECT id FROM users WHERE username_lower = lower(%s)",
                            str(options["as_username"]))
            if not rows:
                raise ReadError(f"User not found: {options['as_username']}")
            return int(rows[0]["id"])
        if "as_user_id" in options:
            value = options["as_user_id"]
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ReadError("as_user_id must be a positive integer")
            if self._user(value) is None:
                raise ReadError(f"User not found: {value}")
            return value
        return default

    def _is_admin(self, user_id: int | None) -> bool:
        if user_id is None:
            return False
        user = self._user(user_id)
        return bool(user and user["admin"])

    def can_see_topic(self, user_id: int | None, topic: dict[str, Any]) -> bool:
        """TopicGuardian#can_see_topic? for the cases the demo forum has."""
        if self._is_admin(user_id):
            return True
        if topic["deleted_at"] is not None:
            return False
        if topic["archetype"] == "private_message":
            return user_id is not None and bool(self.sql(
                "SELECT 1 FROM topic_allowed_users WHERE topic_id = %s AND user_id = %s",
                topic["id"], user_id))
        rows = self.sql("SELECT read_restricted FROM categories WHERE id = %s",
                        topic["category_id"])
        return bool(rows) and not rows[0]["read_restricted"]

    def _visible_posts(self, user_id: int | None, where: str, *params: Any) -> list[dict[str, Any]]:
        staff = self._is_admin(user_id)
        return self.sql(f"""SELECT p.*, u.username, u.name, u.admin, u.moderator, u.trust_level
                            FROM posts p LEFT JOIN users u ON u.id = p.user_id
                            WHERE p.deleted_at IS NULL AND {where}
                              AND (%s OR p.post_type <> 4)
                              AND (%s OR NOT p.hidden OR p.user_id = %s)
                            ORDER BY p.post_number""", *params, staff, staff, user_id)

    # --- serializers ------------------------------------------------------------------------

    def topic_json(self, topic: dict[str, Any], *, full: bool = False) -> dict[str, Any]:
        """ListableTopicSerializer's fields (plus getTopic's when ``full``)."""
        data = {key: topic[key] for key in ("id", "title", "slug", "posts_count", "reply_count",
                                            "highest_post_number", "archetype", "visible",
                                            "closed", "archived", "like_count", "views")}
        data.update(fancy_title=html.escape(topic["title"]), excerpt=topic["excerpt"],
                    created_at=_iso(topic["created_at"]), bumped_at=_iso(topic["bumped_at"]),
                    last_posted_at=_iso(topic["last_posted_at"]), pinned=False, unpinned=None)
        if full:
            category = self.sql("SELECT name, slug FROM categories WHERE id = %s",
                                topic["category_id"])
            first = self.sql("SELECT id FROM posts WHERE topic_id = %s AND post_number = 1",
                             topic["id"])
            tags = self.sql("""SELECT t.name FROM tags t JOIN topic_tags tt ON tt.tag_id = t.id
                               WHERE tt.topic_id = %s ORDER BY t.name""", topic["id"])
            data.update(url=f"/t/{topic['slug'] or 'topic'}/{topic['id']}",
                        tags=[t["name"] for t in tags], category_id=topic["category_id"],
                        first_post_id=first[0]["id"] if first else None,
                        category_name=category[0]["name"] if category else None,
                        category_slug=category[0]["slug"] if category else None)
        return data

    def post_json(self, post: dict[str, Any], topic: dict[str, Any],
                  reader: int | None) -> dict[str, Any]:
        """PostSerializer's fields (with ``raw``) and the topic nested, as the runner returns."""
        data = {key: post[key] for key in ("id", "post_number", "post_type", "raw", "cooked",
                                           "reply_to_post_number", "reply_count", "quote_count",
                                           "topic_id", "user_id", "hidden", "version", "wiki",
                                           "username", "name", "like_count", "reads")}
        data.update(created_at=_iso(post["created_at"]), updated_at=_iso(post["updated_at"]),
                    display_username=post["name"] or post["username"], topic_slug=topic["slug"],
                    admin=bool(post["admin"]), moderator=bool(post["moderator"]),
                    staff=bool(post["admin"] or post["moderator"]),
                    trust_level=post["trust_level"], yours=reader == post["user_id"],
                    deleted_at=None, user_deleted=False, topic=self.topic_json(topic))
        return data

    def topic(self, topic_id: Any) -> dict[str, Any] | None:
        """The topic row (None when missing)."""
        if not isinstance(topic_id, int) and not (isinstance(topic_id, str) and topic_id.isdigit()):
            raise ReadError("topic_id must be a positive integer")
        rows = self.sql("SELECT * FROM topics WHERE id = %s", int(topic_id))
        return rows[0] if rows else None
