"""The pure pipeline core: types, fusion, aggregation, zones, text and sanitizing.

Nothing in this package does I/O. Adapters (PostgreSQL, Redis, ONNX, Ollama, HTTP) live beside
it and hand it plain values, which keeps every ranking decision testable without services.

Imports: nothing of the sidecar but itself, nor ``models`` or ``jobs``. Imported by every layer
above it.
"""
