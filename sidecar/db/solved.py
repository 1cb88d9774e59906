"""discourse-solved's accepted answers: where each version keeps them, how they are read, and how
an import writes them (for a forum the sidecar owns).

Where a forum keeps them, newest first:

* ``answers``: ``discourse_solved_topic_answers`` (since 2026-04, plugin migration
  ``20260408165014_add_discourse_solved_topic_answers``): one row per accepted answer
  (``answer_post_id`` unique), ``solved_topic_id`` pointing at ``discourse_solved_solved_topics``.
  A topic may have several.
* ``column``: ``discourse_solved_solved_topics.answer_post_id`` (2025 to 2026-04), one per topic.
  Since 2026-04 nullable, and then dropped, or kept but no longer written.
* ``custom_fields``: ``topic_custom_fields`` rows named ``accepted_answer_post_id`` (before
  2025): copied to the table in 2025, never deleted, no longer written.

Only the newest storage a forum has is read: where a newer one exists the older ones are stale
copies (an answer unaccepted since would come back). What exists is decided by the columns
``pg_attribute`` lists and the sidecar's role may read
(:func:`sidecar.db.chain_read.detect_schema`): ``has_column_privilege`` on a column name that
does not exist raises, so it is never asked by name. Only public posts of the topic itself
count as its accepted answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

import psycopg
from psycopg import sql

from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE
from sidecar.dump_format import TopicRow

SOLVED_TABLE = "discourse_solved_solved_topics"
ANSWERS_TABLE = "discourse_solved_topic_answers"
CUSTOM_FIELDS_TABLE = "topic_custom_fields"
ACCEPTED_FIELD = "accepted_answer_post_id"
Storage = Literal["answers", "column", "custom_fields"]

# The (table, column) pairs each storage needs; detected with the other optional columns.
COLUMNS: tuple[tuple[str, str], ...] = (
    (SOLVED_TABLE, "id"), (SOLVED_TABLE, "topic_id"), (SOLVED_TABLE, "answer_post_id"),
    (ANSWERS_TABLE, "id"), (ANSWERS_TABLE, "solved_topic_id"), (ANSWERS_TABLE, "answer_post_id"),
    (CUSTOM_FIELDS_TABLE, "id"), (CUSTOM_FIELDS_TABLE, "topic_id"),
    (CUSTOM_FIELDS_TABLE, "name"), (CUSTOM_FIELDS_TABLE, "value"),
)


class Columns(Protocol):
    """What a forum's detected schema says (:class:`sidecar.db.chain_read.ForumSchema`)."""

    def has(self, table: str, column: str) -> bool:
        """True when ``table.column`` exists and may be read."""
        ...


def storage_of(schema: Columns) -> Storage | None:
    """The newest storage of accepted answers this forum has (None: no discourse-solved)."""
    if all(schema.has(*c) for c in ((ANSWERS_TABLE, "solved_topic_id"),
                                    (ANSWERS_TABLE, "answer_post_id"),
                                    (SOLVED_TABLE, "id"), (SOLVED_TABLE, "topic_id"))):
        return "answers"
    if schema.has(SOLVED_TABLE, "topic_id") and schema.has(SOLVED_TABLE, "answer_post_id"):
        return "column"
    if all(schema.has(CUSTOM_FIELDS_TABLE, c) for c in ("topic_id", "name", "value")):
        return "custom_fields"
    return None


def _row_id(schema: Columns, table: str, alias: str) -> sql.Composable:
    # Newest first: the latest row wins where a storage holds one answer per topic.
    if schema.has(table, "id"):
        return sql.SQL("{}.id").format(sql.Identifier(alias))
    return sql.SQL("0")


def _answers_of_topic(schema: Columns, storage: Storage) -> sql.Composable:
    """(answer, row_id) rows of the topic ``x.topic_id`` in ``storage``."""
    if storage == "answers":
        return sql.SQL(
            "SELECT a.answer_post_id::int AS answer, {row_id} AS row_id FROM {answers} a"
            " JOIN {solved} s ON s.id = a.solved_topic_id WHERE s.topic_id = x.topic_id"
        ).format(answers=sql.Identifier(ANSWERS_TABLE), solved=sql.Identifier(SOLVED_TABLE),
                 row_id=_row_id(schema, ANSWERS_TABLE, "a"))
    if storage == "column":
        return sql.SQL(
            "SELECT s.answer_post_id::int AS answer, {row_id} AS row_id FROM {solved} s"
            " WHERE s.topic_id = x.topic_id"
        ).format(solved=sql.Identifier(SOLVED_TABLE), row_id=_row_id(schema, SOLVED_TABLE, "s"))
    # Custom field values are text: only a plain integer is taken as a post id.
    return sql.SQL(
        "SELECT CASE WHEN f.value ~ '^[0-9]{{1,9}}$' THEN f.value::int END AS answer,"
        " {row_id} AS row_id FROM {fields} f WHERE f.topic_id = x.topic_id AND f.name = {field}"
    ).format(fields=sql.Identifier(CUSTOM_FIELDS_TABLE), field=sql.Literal(ACCEPTED_FIELD),
             row_id=_row_id(schema, CUSTOM_FIELDS_TABLE, "f"))


def accepted_ids_sql(schema: Columns, *, replies_only: bool = False) -> sql.Composable:
    """An ``int[]`` expression: the accepted answers of the topic ``x.topic_id`` that are public
    posts of that topic, newest first (empty without any; ``replies_only``: never its opening
    post)."""
    storage = storage_of(schema)
    if storage is None:
        return sql.SQL("'{}'::int[]")
    reply = sql.SQL(" AND p.post_number > 1" if replies_only else "")
    return sql.SQL(
        """
        coalesce((SELECT array_agg(a.answer ORDER BY a.row_id DESC) FROM ({rows}) a
         WHERE a.answer IS NOT NULL AND EXISTS (
             SELECT 1 FROM posts p {joins}
             WHERE p.id = a.answer AND p.topic_id = x.topic_id AND {public}{reply})),
         '{{}}'::int[])
        """
    ).format(rows=_answers_of_topic(schema, storage), joins=sql.SQL(PUBLIC_JOINS),
             public=sql.SQL(PUBLIC_WHERE), reply=reply)


def solved_topics_sql(schema: Columns) -> sql.Composable:
    """A query of one ``topic_id`` column: every topic that has an accepted answer (public or
    not: :func:`accepted_ids_sql` decides), for a scan of all of them."""
    storage = storage_of(schema)
    if storage == "answers":
        return sql.SQL("SELECT DISTINCT s.topic_id FROM {solved} s JOIN {answers} a"
                       " ON a.solved_topic_id = s.id").format(
            solved=sql.Identifier(SOLVED_TABLE), answers=sql.Identifier(ANSWERS_TABLE))
    if storage == "column":
        return sql.SQL("SELECT topic_id FROM {solved} WHERE answer_post_id IS NOT NULL").format(
            solved=sql.Identifier(SOLVED_TABLE))
    if storage == "custom_fields":
        return sql.SQL("SELECT DISTINCT topic_id FROM {fields} WHERE name = {field}").format(
            fields=sql.Identifier(CUSTOM_FIELDS_TABLE), field=sql.Literal(ACCEPTED_FIELD))
    return sql.SQL("SELECT NULL::int AS topic_id WHERE false")


# discourse-solved's current tables, created on import the way installing the plugin would (a
# real forum has them only when it runs the plugin): the topic table without the answer columns
# (the post-deploy migration that drops them), and one row per accepted answer. Named with their
# schema: the importer's connection searches the sidecar's own schema first.
TABLES_DDL = """
CREATE TABLE IF NOT EXISTS public.discourse_solved_solved_topics (
  id               bigint       NOT NULL PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY,
  topic_id         integer      NOT NULL,
  topic_timer_id   integer,
  created_at       timestamp(6) NOT NULL,
  updated_at       timestamp(6) NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS index_discourse_solved_solved_topics_on_topic_id
  ON public.discourse_solved_solved_topics (topic_id);
CREATE TABLE IF NOT EXISTS public.discourse_solved_topic_answers (
  id               bigint       NOT NULL PRIMARY KEY GENERATED BY DEFAULT AS IDENTITY,
  solved_topic_id  bigint       NOT NULL REFERENCES public.discourse_solved_solved_topics (id),
  answer_post_id   bigint       NOT NULL,
  accepter_user_id bigint       NOT NULL,
  created_at       timestamp(6) NOT NULL,
  updated_at       timestamp(6) NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS index_discourse_solved_topic_answers_on_answer_post_id
  ON public.discourse_solved_topic_answers (answer_post_id);
CREATE INDEX IF NOT EXISTS index_discourse_solved_topic_answers_on_solved_topic_id
  ON public.discourse_solved_topic_answers (solved_topic_id);
"""
_NOW = "now() AT TIME ZONE 'utc'"


def _has_old_column(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid ="
        " 'public.discourse_solved_solved_topics'::regclass AND attname = 'answer_post_id'"
        " AND NOT attisdropped)").fetchone()
    return bool(row and row[0])


def replace_accepted_answers(
    conn: psycopg.Connection[Any], topics: Sequence[tuple[int, TopicRow]]
) -> list[tuple[int, str]]:
    """Make each topic's accepted answer the dump's (none when the row names none), in the
    current tables; a forum made by an older sidecar keeps its ``answer_post_id`` column, which
    is written too (as the plugin's triggers did while both existed).

    Returns (line, error) for an answer that is not a post of its topic; that topic is left
    without an accepted answer.
    """
    conn.execute(TABLES_DDL)
    ids = [t.id for _, t in topics]
    bad = conn.execute(
        """
        SELECT x.topic_id, x.answer FROM unnest(%s::int[], %s::int[]) AS x(topic_id, answer)
        WHERE x.answer IS NOT NULL AND NOT EXISTS (
            SELECT 1 FROM posts p WHERE p.id = x.answer AND p.topic_id = x.topic_id)
        """,
        (ids, [t.accepted_answer_post_id for _, t in topics]),
    ).fetchall()
    rejected = {r[0] for r in bad}
    wanted = (ids, [None if t.id in rejected else t.accepted_answer_post_id for _, t in topics])
    conn.execute(
        """
        DELETE FROM public.discourse_solved_topic_answers a
        USING public.discourse_solved_solved_topics s,
              unnest(%s::int[], %s::int[]) AS x(topic_id, answer)
        WHERE a.solved_topic_id = s.id AND s.topic_id = x.topic_id
          AND a.answer_post_id IS DISTINCT FROM x.answer
        """, wanted)
    conn.execute(
        """
        DELETE FROM public.discourse_solved_solved_topics s
        USING unnest(%s::int[], %s::int[]) AS x(topic_id, answer)
        WHERE s.topic_id = x.topic_id AND x.answer IS NULL
        """, wanted)
    old = _has_old_column(conn)
    columns = "topic_id, answer_post_id, accepter_user_id" if old else "topic_id"
    values = "x.topic_id, x.answer, -1" if old else "x.topic_id"
    on_conflict = ("DO UPDATE SET answer_post_id = EXCLUDED.answer_post_id WHERE"
                   " s.answer_post_id IS DISTINCT FROM EXCLUDED.answer_post_id"
                   if old else "DO NOTHING")
    conn.execute(sql.SQL(
        "INSERT INTO public.discourse_solved_solved_topics AS s ({columns}, created_at,"
        " updated_at) SELECT {values}, {now}, {now}"
        " FROM unnest(%s::int[], %s::int[]) AS x(topic_id, answer) WHERE x.answer IS NOT NULL"
        " ON CONFLICT (topic_id) {on_conflict}").format(
        columns=sql.SQL(columns), values=sql.SQL(values), now=sql.SQL(_NOW),
        on_conflict=sql.SQL(on_conflict)), wanted)
    conn.execute(sql.SQL(
        """
        INSERT INTO public.discourse_solved_topic_answers
               (solved_topic_id, answer_post_id, accepter_user_id, created_at, updated_at)
        SELECT s.id, x.answer, -1, {now}, {now}
        FROM unnest(%s::int[], %s::int[]) AS x(topic_id, answer)
        JOIN public.discourse_solved_solved_topics s ON s.topic_id = x.topic_id
        WHERE x.answer IS NOT NULL
        ON CONFLICT (answer_post_id) DO NOTHING
        """).format(now=sql.SQL(_NOW)), wanted)
    line_of = {t.id: line for line, t in topics}
    return [(line_of[r[0]], f"accepted_answer_post_id {r[1]} is not a post of this topic")
            for r in bad]
