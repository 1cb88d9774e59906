"""The HTTP API: a Flask app factory, request schemas, auth, errors, OpenAPI and metrics."""

from sidecar.api.app import create_app

__all__ = ["create_app"]
