"""POST /v1/sanitize: turn an LLM answer's [[n]] citations into checked post-level links."""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint("sanitize", __name__)
