"""Related topics: the topics near a topic (``/v1/topics/<id>/related``) and near a draft
(``/v1/similar``, "already asked?").

``service`` ranks a topic's neighbours from stored vectors, ``similar`` searches a member's draft,
``cache`` keeps the ranked lists in Redis (the jobs drop them on index events). See
docs/related.md.

Imports: ``search``, ``core``, ``db``, ``config``, ``errors``; a service takes what it needs of the
process's resources through a protocol declared beside it, never ``runtime``. Imported by ``api``,
``jobs`` (the cache), ``evaluation`` and ``bench``. Nothing is imported here.
"""
