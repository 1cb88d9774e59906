"""Getting a forum in: dumps imported into an owned database, mail archives turned into dumps,
posts embedded.

``importer`` loads a dump (``sidecar import``; the row models are ``sidecar.dump_format``),
``mail_dump`` and ``mail_forum`` turn mail archives into a dump (``sidecar dump-mail``),
``indexing`` embeds stale posts (the synchronous backfill and the jobs share it). What
``sidecar prepare`` runs in order is ``sidecar.runtime.bootstrap``.

Imports: ``core``, ``db``, ``dump_format``, ``errors`` and ``models``. Imported by ``runtime``,
``jobs``, ``cli``, ``evaluation`` and ``bench``. Nothing is imported here.
"""
