"""Writing the search profile: atomically, under a lock every writer takes.

Several commands write the one profile file (``sidecar tune``, ``calibrate``, ``tune-links``,
``train-reranker``, ``reranker rollback``), from timers that may run at once. Each write goes
to a temporary file of its own beside the profile, then replaces it (a reader never sees half a
file), under an ``flock`` on ``<profile>.lock``; :func:`update_profile` also reads the file
under that lock, so a command never undoes what another wrote meanwhile.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sidecar.search.profile_schema import SearchProfile


@contextmanager
def profile_lock(path: Path) -> Iterator[None]:
    """Hold the profile's lock (``flock`` on ``<profile>.lock`` beside it): commands that write
    the profile (tune, calibrate, train-reranker, rollback...) take turns, across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _replace(path: Path, profile: SearchProfile) -> str:
    # A temporary file of its own in the same folder (os.replace is atomic only within one
    # file system), so two writers never write or rename each other's half-written file.
    text = profile.model_dump_json(indent=2) + "\n"
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)  # mkstemp makes it 0600: the API may run as another user
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return hashlib.sha256(text.encode()).hexdigest()


def write_profile(path: Path, profile: SearchProfile) -> str:
    """Write a profile atomically (a reader never sees half a file), under the profile's
    lock; returns its digest. To change what the file holds, :func:`update_profile`."""
    with profile_lock(path):
        return _replace(path, profile)


def update_profile(path: Path, change: Callable[[], SearchProfile]) -> str:
    """Read, change and write the profile under its lock: ``change`` builds the new profile
    from the file as it is now (``with_zones``, ``updated_profile``...), so a command that
    wrote meanwhile is never undone. Returns the digest."""
    with profile_lock(path):
        return _replace(path, change())
