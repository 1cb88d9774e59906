"""Retrieval evaluation on real forum data with human judgements (`sidecar eval`).

``metrics`` holds the pure measures (hit@k, MRR@k, nDCG@k, average precision, the paired
bootstrap); ``dataset`` reads a dump's queries and qrels; ``state`` imports and embeds the dump
once into a database of its own; ``configs`` is the matrix of configurations; ``runner`` runs
them through the product's own search; ``report`` writes the JSON, Markdown and PNG outputs.
``zones`` and ``related`` measure the answer zones and the related topics the same way.

Imports: ``runtime``, the capabilities (``search``, ``answer``, ``related``, ``ingest``) and what
lies below; never ``api``. Imported by ``cli``, ``tuning`` and ``bench``.
"""
