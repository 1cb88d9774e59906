"""Configuration: the one frozen ``Settings`` object read from ``SIDECAR_*`` variables, and the
embedded PostgreSQL's memory sizing it checks (``pgconf``).

Imports: ``core`` only. Imported by nearly everything above it (every capability, ``runtime``,
``api``, ``cli``, ``jobs``); ``db`` and ``core`` never need it. Nothing is imported here.
"""
