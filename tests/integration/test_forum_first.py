"""The forum first: a lock held on a Discourse table costs the sidecar a timeout, never the forum
a write; every connection says who it is and how long it may wait.

The sidecar runs as its least-privilege role (tests/conftest.py) with the API's limits; the
forum's owner holds the locks and writes, as Discourse (or its migrations) would.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from sidecar.db.vector_index import ensure_index, index_name, index_valid
from sidecar.runtime.dbsession import session_limits
from tests.conftest import API_KEY, demo_forum, owner_url
from tests.helpers import add_post

API_TIMEOUT_S = 3.0
API_LOCK_S = 1.0
AUTH = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture(scope="module")
def api_res(pg_admin_url: str, redis_url: str, tmp_path_factory: pytest.TempPathFactory,
            minilm: Any) -> Iterator[Any]:
    """The demo forum, embedded, with resources started as an API process is."""
    with demo_forum(pg_admin_url, redis_url, tmp_path_factory.mktemp("locks"), minilm,
                    prefix="t_lock", purpose="api", db_api_timeout_s=API_TIMEOUT_S,
                    db_api_lock_timeout_s=API_LOCK_S) as res:
        yield res


@pytest.fixture(scope="module")
def api(api_res: Any) -> Any:
    from sidecar.api.app import create_app

    return create_app(api_res.settings, api_res).test_client()


def test_each_connection_names_itself_and_bounds_its_waits(api_res: Any) -> None:
    with api_res.db.connection() as conn:
        row = conn.execute(
            "SELECT current_user AS who, current_setting('application_name') AS app,"
            " current_setting('statement_timeout') AS statement,"
            " current_setting('lock_timeout') AS lock,"
            " current_setting('idle_in_transaction_session_timeout') AS idle").fetchone()
    assert row == {"who": "sidecar", "app": "sidecar-api", "statement": "3s", "lock": "1s",
                   "idle": "1min"}
    with psycopg.connect(api_res.conninfo("index")) as conn:
        app, statement = conn.execute("SELECT current_setting('application_name'),"
                                      " current_setting('statement_timeout')").fetchone() or ()
    assert (app, statement) == ("sidecar-index", "6h")


@pytest.mark.parametrize("call", [
    ("post", "/v1/search", {"query": "How do I grow a ZFS RAIDZ pool?", "limit": 3}),
    ("get", "/v1/topics/9/related?limit=3", None),
])
def test_a_locked_posts_table_answers_503_within_the_timeout(api: Any, api_res: Any,
                                                             call: tuple[str, str, Any]) -> None:
    method, route, body = call
    # A migration of the forum (or any long transaction) holds posts exclusively.
    holder = psycopg.connect(owner_url(api_res.urls.database_url))
    holder.execute("LOCK TABLE posts IN ACCESS EXCLUSIVE MODE")
    try:
        started = time.monotonic()
        resp = getattr(api, method)(route, json=body, headers=AUTH)
        took = time.monotonic() - started
    finally:
        holder.rollback()
        holder.close()
    assert resp.status_code == 503, resp.json
    error = resp.json["error"]
    assert error["code"] == "database_timeout"
    assert "time limit" in error["message"] and error["request_id"]
    assert took < API_TIMEOUT_S + 2.0, took
    # The lock gone, the same call answers.
    again = getattr(api, method)(route, json=body, headers=AUTH)
    assert again.status_code == 200, again.json


def _waiting_index_build(owner: str) -> bool:
    with psycopg.connect(owner) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name ="
                           " 'sidecar-index' AND wait_event_type = 'Lock'").fetchone()
    return bool(row and row[0])


def _sidecar_locks(owner: str) -> set[tuple[str, str]]:
    with psycopg.connect(owner) as conn:
        return {(str(r[0]), str(r[1])) for r in conn.execute(
            "SELECT c.relname, l.mode FROM pg_locks l JOIN pg_stat_activity a USING (pid)"
            " JOIN pg_class c ON c.oid = l.relation WHERE a.application_name LIKE 'sidecar-%'"
            " AND l.granted AND c.relname IN ('posts', 'topics', 'ai_posts_embeddings')")}


def test_the_forum_writes_while_the_sidecar_builds_an_index(api_res: Any, tmp_path: Path) -> None:
    # The owner of ai_posts_embeddings builds it, as `sidecar db upgrade --as-owner` does (the
    # role may create nothing in the forum's schema), with the index builds' name and limits.
    owner = owner_url(api_res.urls.database_url)
    model = api_res.model
    name = index_name(model.id, 1, "binary")
    # A writer of the forum in the middle of its transaction (discourse-ai storing a vector):
    # CREATE INDEX CONCURRENTLY waits for it to end, without blocking anyone meanwhile.
    old = psycopg.connect(owner)
    old.execute("INSERT INTO ai_posts_embeddings SELECT post_id, 7, 1, 1, 1, digest, embeddings,"
                " created_at, updated_at FROM ai_posts_embeddings WHERE model_id = %s LIMIT 1",
                (model.id,))
    errors: list[BaseException] = []

    def build() -> None:
        try:
            ensure_index(session_limits(api_res.settings, "index").conninfo(owner), model, 1,
                         "binary")
        except BaseException as exc:  # reported by the test below
            errors.append(exc)

    builder = threading.Thread(target=build)
    builder.start()
    try:
        deadline = time.monotonic() + 30
        while not _waiting_index_build(owner):
            assert time.monotonic() < deadline and builder.is_alive(), errors
            time.sleep(0.1)
        # The sidecar holds nothing on posts, and on the vectors only what lets writes through.
        assert _sidecar_locks(owner) <= {("ai_posts_embeddings", "ShareUpdateExclusiveLock")}
        # A blocked write fails after 2 s instead of hanging.
        writing = make_conninfo(owner, options="-c lock_timeout=2000")
        add_post(writing, "SELECT 20", "A new reply, written while the index builds.")
        with psycopg.connect(writing, autocommit=True) as writer:
            writer.execute("INSERT INTO ai_posts_embeddings SELECT post_id, 8, 1, 1, 1, digest,"
                           " embeddings, created_at, updated_at FROM ai_posts_embeddings"
                           " WHERE model_id = %s LIMIT 1", (model.id,))
            writer.execute("UPDATE posts SET updated_at = now() WHERE id = (SELECT min(id)"
                           " FROM posts)")
    finally:
        old.rollback()
        old.close()
        builder.join(timeout=60)
    assert not errors, errors
    with psycopg.connect(owner) as conn:
        assert index_valid(conn, name) is True
        conn.execute("DELETE FROM ai_posts_embeddings WHERE model_id IN (7, 8)")
