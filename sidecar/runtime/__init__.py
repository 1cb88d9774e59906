"""What a process runs on: started once, explicitly, by the API, the worker and each command.

``resources`` holds the one ``Resources`` of a process (database pool, Redis, models, and the
services built on them); ``services`` starts or joins the embedded PostgreSQL and Redis;
``model_setup`` prepares the embedding model on first need and ``model_loading`` loads and
registers it; ``bootstrap`` is what ``sidecar prepare`` does (demo forum, embeddings, indexes);
``logs`` is the one log format, ``machine`` the machine that reports name.

Imports: the capabilities it wires (``answer``, ``moderation``, ``search``, ``ingest``,
``keyword``) and everything below them. Imported by ``api``, ``jobs``, ``cli`` and the operator
commands (``evaluation``, ``tuning``, ``bench``); the capabilities never import it (they declare
what they take as a protocol). Nothing is imported here: gunicorn masters import
``model_setup`` before they fork, and must not load numpy or ONNX Runtime.
"""
