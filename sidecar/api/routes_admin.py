"""Operator routes: backfill runs and queues."""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint("admin", __name__)
