"""Which embedding model the forum serves, when a forum-tuned one was promoted; and its vectors.

The choice lives in the database (``sidecar_meta``), which every API node and worker shares, so
one write switches them all: each process reads it when it starts (``systemctl reload`` applies
it), loads that model, and searches that model's vectors only, so a query is never compared
with another model's vectors. The entry it replaced is kept as ``previous``: rollback is one
more write while those vectors are kept.
"""

from __future__ import annotations

from typing import Any

from psycopg import sql
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from models.names import InvalidModelName, check_model_name
from sidecar.db.embeddings import RegisteredModel
from sidecar.db.meta import get_meta, set_meta
from sidecar.db.pool import DictConn
from sidecar.db.public import PUBLIC_JOINS, PUBLIC_WHERE
from sidecar.errors import ConfigurationError

SERVED_KEY = "embedder:served"
PRUNE_BATCH = 5000  # vectors deleted per statement (short transactions on a live forum)


class EmbedderEntry(BaseModel):
    """A promoted embedding model: its name, the model it was tuned from, why it serves."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="The model's name: its folder under the models folder.")
    base: str = Field(description="The configured model (SIDECAR_EMBED_MODEL) it was tuned "
                                  "from; it serves only while that is still the one configured.")
    promoted_at: str
    evidence: dict[str, Any] = Field(default_factory=dict,
                                     description="What the guard measured, or the operator's "
                                                 "explicit choice.")
    previous: dict[str, Any] | None = Field(
        default=None, description="The entry it replaced (none: the configured model served).")

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        # It names a folder under the models folder: only what a command may name a model
        # (``base`` is only compared with SIDECAR_EMBED_MODEL).
        try:
            return check_model_name(value)
        except InvalidModelName as exc:
            raise ValueError(str(exc)) from exc

    @field_validator("previous")
    @classmethod
    def _previous_entry(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:  # a rollback serves it: the same checks
            EmbedderEntry.model_validate({"previous": None, **value})
        return value


def read_served(conn: DictConn) -> EmbedderEntry | None:
    """The promoted embedder, if any."""
    raw = get_meta(conn, SERVED_KEY)
    if not raw:
        return None
    try:  # the role can write sidecar_meta: what names a folder is checked before it does
        return EmbedderEntry.model_validate_json(raw)
    except ValidationError as exc:
        why = exc.errors()[0]["msg"]
        raise ConfigurationError(
            f"sidecar_meta's {SERVED_KEY} is not an entry the sidecar writes ({why}): "
            "`sidecar embedder rollback` cannot read it either; delete it (DELETE "
            f"FROM sidecar.sidecar_meta WHERE key = '{SERVED_KEY}') to serve the configured "
            "model, then promote again") from exc


def write_served(conn: DictConn, entry: EmbedderEntry | None) -> None:
    """Serve ``entry`` (None: the configured model) from the next process start on."""
    if entry is None:
        conn.execute("DELETE FROM sidecar_meta WHERE key = %s", (SERVED_KEY,))
    else:
        set_meta(conn, SERVED_KEY, entry.model_dump_json())


def coverage(conn: DictConn, model: RegisteredModel, strategy_id: int) -> tuple[int, int]:
    """(public posts, those with a vector of ``model``): a model serves only at full cover."""
    row = conn.execute(
        sql.SQL("SELECT count(*) AS public, count(e.post_id) AS covered FROM posts p {joins}"
                " LEFT JOIN ai_posts_embeddings e ON e.post_id = p.id AND e.model_id = %s"
                " AND e.strategy_id = %s WHERE {public}")
        .format(joins=sql.SQL(PUBLIC_JOINS), public=sql.SQL(PUBLIC_WHERE)),
        (model.id, strategy_id),
    ).fetchone()
    return (int(row["public"]), int(row["covered"])) if row else (0, 0)


def delete_model_vectors(conn: DictConn, model_id: int) -> int:
    """Delete up to :data:`PRUNE_BATCH` vectors of a model; returns how many (0: none left)."""
    row = conn.execute(
        "WITH gone AS (DELETE FROM ai_posts_embeddings WHERE ctid = ANY (ARRAY("
        " SELECT ctid FROM ai_posts_embeddings WHERE model_id = %s LIMIT %s))"
        " RETURNING 1) SELECT count(*) AS n FROM gone",
        (model_id, PRUNE_BATCH),
    ).fetchone()
    return int(row["n"]) if row else 0


def models_with_vectors(conn: DictConn) -> list[tuple[RegisteredModel, int]]:
    """Every registered model that has vectors, with how many (all strategies)."""
    rows = conn.execute(
        "SELECT m.id, m.name, m.dimensions, m.version, count(e.post_id) AS n"
        " FROM sidecar_embedding_models m JOIN ai_posts_embeddings e ON e.model_id = m.id"
        " GROUP BY m.id ORDER BY m.id").fetchall()
    return [(RegisteredModel(id=int(r["id"]), name=str(r["name"]),
                             dimensions=int(r["dimensions"]), version=int(r["version"])),
             int(r["n"])) for r in rows]
