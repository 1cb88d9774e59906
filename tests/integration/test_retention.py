"""The retrieval log keeps to its retention period; labelled retrievals stay."""

from __future__ import annotations

import uuid
from pathlib import Path

import psycopg
from click.testing import CliRunner

from sidecar.cli import main
from sidecar.db.migrate import upgrade


def _insert(conn: psycopg.Connection, days_old: int) -> uuid.UUID:  # type: ignore[type-arg]
    rid = uuid.uuid4()
    conn.execute(
        "INSERT INTO sidecar.sidecar_retrievals (id, created_at, conversation, query,"
        " query_source, zone,"
        " scorer) VALUES (%s, now() - make_interval(days => %s), '[]', 'q', 'single_turn',"
        " 'abstain', 'none')",
        (rid, days_old),
    )
    return rid


def test_purge_deletes_old_unlabelled_retrievals_only(db_url: str, redis_url: str,
                                                      tmp_path: Path) -> None:
    upgrade(db_url)
    with psycopg.connect(db_url) as conn:
        old = _insert(conn, 100)
        old_labelled = _insert(conn, 100)
        recent = _insert(conn, 3)
        conn.execute("INSERT INTO sidecar.sidecar_retrieval_labels (retrieval_id, label)"
                     " VALUES (%s, 'correct_abstention')", (old_labelled,))
    env = {"DATABASE_URL": db_url, "REDIS_URL": redis_url,
           "SIDECAR_STATE_DIR": str(tmp_path), "SIDECAR_RETRIEVAL_RETENTION_DAYS": "30"}
    result = CliRunner().invoke(main, ["retrievals", "purge"], env=env)
    assert result.exit_code == 0, result.output
    assert '"deleted": 1' in result.output
    with psycopg.connect(db_url) as conn:
        left = {r[0] for r in conn.execute("SELECT id FROM sidecar.sidecar_retrievals")}
    assert left == {old_labelled, recent} and old not in left
    again = CliRunner().invoke(main, ["retrievals", "purge", "--days", "1"], env=env)
    assert '"deleted": 1' in again.output  # the 3-day-old one, now past a 1-day retention
