"""The moderator review pages (server-rendered HTML) and their JSON API."""

from __future__ import annotations

from flask import Blueprint

bp = Blueprint("moderation", __name__)
