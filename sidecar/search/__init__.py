"""Search: a question in, the public topics that answer it out (``sidecar search``, ``/v1/search``).

``service`` is the hybrid search (semantic and keyword legs, fusion, aggregation, the rerank
chain); ``chain`` and ``links`` are the adapters of the rerank chain and of the post chooser;
``profile`` is the served configuration that ``sidecar tune`` chose. The ranking rules are pure,
in ``sidecar.core``.

Imports: ``core``, ``db``, ``keyword``, ``config``, ``errors`` and ``models``. Imported by the
capabilities built on search (``answer``, ``related``, ``moderation``), by ``runtime`` (which
builds the one search of a process) and by the layers above. Nothing is imported here.
"""
