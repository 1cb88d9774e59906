"""The ``sidecar`` command line: one module per concern.

Imports: every layer (``api``, ``runtime``, the capabilities, the operator commands), each
command when it runs (gunicorn masters import every command module before they fork).
Imported by ``sidecar.__main__`` and the ``sidecar`` script only.
"""

from sidecar.cli.main import main

__all__ = ["main"]
