"""POST /v1/index/events: incremental re-embedding when the forum changes."""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint("index", __name__)
