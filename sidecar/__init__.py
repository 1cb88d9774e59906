"""Forum RAG sidecar: search and answer grounding for a Discourse-style forum."""

__version__ = "0.1.0"
