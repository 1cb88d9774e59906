"""The ``sidecar`` command line."""

from sidecar.cli.main import main

__all__ = ["main"]
