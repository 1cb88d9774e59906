"""POST /v1/retrieve: condense, gate, rerank, zones and evidence for the forum's assistant."""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint("retrieve", __name__)
