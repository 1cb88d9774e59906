"""`sidecar tune`: the served search configuration chosen by cross-validation on judgements.

Also `sidecar tune-links` (the linked post's rule). Imports: ``evaluation``, ``runtime``,
``search`` (the profile it writes) and what lies below; never ``api``. Imported by ``cli``.
"""
