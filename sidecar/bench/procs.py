"""Servers the benchmarks start in subprocesses: waiting until they answer."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import httpx


def wait_healthy(url: str, proc: subprocess.Popen[Any], timeout: float) -> None:
    """Poll ``url`` until it answers 200; fail at once if the server exits, or after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode} before being ready")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"the server was not ready after {timeout:.0f} s ({url})")
        time.sleep(0.25)
