"""What the commands print: JSON on stdout, for people and scripts alike."""

from __future__ import annotations

import json

import click


def echo_json(data: object) -> None:
    """Pretty JSON on stdout."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))
