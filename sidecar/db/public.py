"""The one definition of "public content", applied inside every query that returns posts.

A post is public when it is a regular post (no whisper, no moderator or small action), not
deleted (by staff or by its author), not hidden and not empty; its topic is a regular topic (not
a private message), listed and not deleted; its category (and that category's parent) is not
read-restricted. This is Discourse's ``badge_posts`` view without ``allow_badges``, narrowed to
regular posts, plus ``hidden`` and ``user_deleted``.
"""

from __future__ import annotations

from typing import LiteralString

# Joins from a posts row aliased ``p`` to its topic ``t``, category ``c`` and parent ``pc``.
PUBLIC_JOINS: LiteralString = """
    JOIN topics t ON t.id = p.topic_id
    JOIN categories c ON c.id = t.category_id
    LEFT JOIN categories pc ON pc.id = c.parent_category_id
"""

PUBLIC_WHERE: LiteralString = """
    p.deleted_at IS NULL AND NOT p.hidden AND NOT p.user_deleted AND p.post_type = 1
    AND p.raw <> ''
    AND t.deleted_at IS NULL AND t.visible AND t.archetype = 'regular'
    AND NOT c.read_restricted AND (pc.id IS NULL OR NOT pc.read_restricted)
"""
