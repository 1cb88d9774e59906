"""The HTTP API: the Flask app factory (``app.create_app``), routes, request schemas, errors,
OpenAPI and metrics; its guards (``auth``: the API key; ``apikey``: the embedded mode's key),
and how gunicorn serves it (``gunicorn_config``, ``gunicorn_hooks``: one configuration for the
API and the model host).

Imports: ``runtime`` (the one ``Resources`` of the process, attached at start-up), the
capabilities (``search``, ``answer``, ``related``, ``moderation``), ``jobs`` (the index events it
enqueues) and what lies below. Imported by ``cli`` and ``deploy/gunicorn.conf.py``. Nothing is
imported here: gunicorn's master imports ``gunicorn_config`` and must not load the app.
"""
