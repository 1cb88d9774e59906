"""The one definition of "public content", applied inside every query that returns posts.

A post is public when it is a regular post (no whisper, no moderator or small action), not
deleted (by staff or by its author), not hidden and not empty; its topic is a regular topic
(not a private message), listed, not deleted and not a shared draft; its category is not
read-restricted, and neither is any of its ancestors, however deep (A restricted -> B -> C makes
C private). This is Discourse's ``badge_posts`` view without ``allow_badges``, narrowed to
regular posts, plus ``hidden``, ``user_deleted`` and shared drafts, and with restrictions
inherited at any depth: Discourse prevents such chains, an imported dump does not.

Cost: the restricted categories and all their descendants come from one recursive query that
does not depend on the row (``UNION`` makes it stop on a parent cycle), turned into an array:
PostgreSQL evaluates it once per query (an InitPlan), and each category row is compared with the
array. Unlike ``NOT IN (subquery)`` this keeps parallel plans available; on a generated forum of
1M posts it costs about what the old one-level join cost (``scripts/explain_public_filter.py``;
``tests/integration/test_restricted_depth.py`` checks the tree is walked once per query).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import LiteralString

from psycopg import sql

from sidecar.db.pool import DictConn

# Joins from a posts row aliased ``p`` to its topic ``t`` and category ``c``.
PUBLIC_JOINS: LiteralString = """
    JOIN topics t ON t.id = p.topic_id
    JOIN categories c ON c.id = t.category_id
"""


def category_subtree(roots: LiteralString) -> LiteralString:
    """A subquery: the ids of the categories ``roots`` selects and of all their descendants.

    ``roots`` is SQL returning one ``id`` column (``SELECT id FROM categories WHERE ...`` or
    ``SELECT unnest(%(cats)s::int[])``). Cycle-safe: ``UNION`` drops ids already found.
    """
    return (
        "(WITH RECURSIVE subtree(id) AS (" + roots + " UNION SELECT child.id FROM categories"
        " child JOIN subtree ON child.parent_category_id = subtree.id) SELECT id FROM subtree)"
    )


# Every category whose posts are private: the restricted ones and everything below them.
RESTRICTED_CATEGORIES: LiteralString = category_subtree(
    "SELECT id FROM categories WHERE read_restricted")


def post_is_public(alias: LiteralString) -> LiteralString:
    """The post-level part of the rule for a posts row aliased ``alias`` (its topic and
    category are checked through ``p`` in PUBLIC_WHERE; a post of the same topic, such as the
    opening post or the post replied to, needs only this part)."""
    return (
        f"{alias}.deleted_at IS NULL AND NOT {alias}.hidden AND NOT {alias}.user_deleted"
        f" AND {alias}.post_type = 1 AND {alias}.raw <> ''"
    )


# A topic with a shared_drafts row is a draft staff share before publishing it: Discourse hides
# it from anyone who may not see shared drafts, whatever its category. An anti-join on the
# table's unique topic_id index (the table holds a handful of rows), so it costs nothing next
# to the rest (scripts/explain_public_filter.py).
NOT_SHARED_DRAFT: LiteralString = (
    "NOT EXISTS (SELECT 1 FROM shared_drafts sd WHERE sd.topic_id = t.id)")

PUBLIC_WHERE: LiteralString = (
    post_is_public("p")
    + " AND t.deleted_at IS NULL AND t.visible AND t.archetype = 'regular'"
    + " AND c.id <> ALL (ARRAY" + RESTRICTED_CATEGORIES + ")"
    + " AND " + NOT_SHARED_DRAFT
)


# A tags row ``g`` that anyone may see (Discourse's DiscourseTagging.hidden_tags_query, for an
# anonymous reader): in no tag group, or in at least one group that the "everyone" group
# (group_id 0) may see. A tag only in groups restricted to other groups (staff, say) is hidden.
PUBLIC_TAG: LiteralString = (
    "(NOT EXISTS (SELECT 1 FROM tag_group_memberships m WHERE m.tag_id = g.id)"
    " OR EXISTS (SELECT 1 FROM tag_group_memberships m JOIN tag_group_permissions gp"
    " ON gp.tag_group_id = m.tag_group_id AND gp.group_id = 0 WHERE m.tag_id = g.id))"
)


def public_post_ids(conn: DictConn, post_ids: Sequence[int], min_chars: int = 1) -> list[int]:
    """The public posts among ``post_ids`` (at least ``min_chars`` long), in id order."""
    rows = conn.execute(
        sql.SQL("SELECT p.id FROM posts p {joins} WHERE p.id = ANY(%s) AND {public}"
                " AND length(p.raw) >= %s ORDER BY p.id").format(
            joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE)),
        (list(post_ids), min_chars),
    ).fetchall()
    return [int(r["id"]) for r in rows]


def public_posts_in_scope(conn: DictConn, *, topic_ids: Sequence[int] = (),
                          category_ids: Sequence[int] = (), min_chars: int = 1) -> list[int]:
    """Public posts of these topics, or of the topics of these categories and their
    subcategories at any depth."""
    rows = conn.execute(
        sql.SQL(
            """
            SELECT p.id FROM posts p {joins}
            WHERE {public} AND length(p.raw) >= %(min_chars)s
              AND (t.id = ANY(%(topics)s::int[]) OR c.id IN {subtree})
            ORDER BY t.bumped_at DESC, t.id DESC, p.post_number
            """
        ).format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE),
                 subtree=sql.SQL(category_subtree("SELECT unnest(%(cats)s::int[])"))),
        {"topics": list(topic_ids), "cats": list(category_ids), "min_chars": min_chars},
    ).fetchall()
    return [int(r["id"]) for r in rows]
