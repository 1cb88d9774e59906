"""The forum's own reranker: mined from its public threads, trained, judged held out, promoted.

`sidecar train-reranker` (and `sidecar eval --train-reranker`). Imports the runtime, search, db,
core and the evaluation's statistics; torch and transformers only while training (the `train`
extra). Imported by the CLI. docs/models.md, "The forum's own reranker".
"""
