"""`sidecar bench`: speed measured side by side (ours against a baseline) in one run.

Imports: ``evaluation``, ``runtime``, ``jobs``, the capabilities and what lies below; never
``api``. Imported by ``cli``. Its scratch forums' SQL is the one allowed outside ``db``.
"""
