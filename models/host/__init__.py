"""A TEI-compatible HTTP host for our ONNX embedder and cross-encoder, with micro-batching.

``create_host_app(embedder, reranker, config)`` builds the Flask app; ``sidecar model-host``
serves it with gunicorn; :class:`ThreadedHost` serves it from a thread for tests and benchmarks.
"""

from models.host.app import close_host_app, create_host_app
from models.host.batcher import MicroBatcher
from models.host.config import HostConfig
from models.host.serve import ThreadedHost

__all__ = ["HostConfig", "MicroBatcher", "ThreadedHost", "close_host_app", "create_host_app"]
