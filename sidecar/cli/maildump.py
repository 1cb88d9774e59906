"""`sidecar dump-mail`: a forum dump from mail archives (a mailing list as a forum)."""

from __future__ import annotations

from pathlib import Path

import click

from sidecar.cli.output import echo_json
from sidecar.ingest.mail_dump import read_archive
from sidecar.ingest.mail_forum import write_dump


@click.command("dump-mail")
@click.argument("sources", nargs=-1, required=True,
                type=click.Path(exists=True, path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Folder the dump is written to (categories/topics/posts JSONL, questions).")
@click.option("--queries", default=100, show_default=True, type=click.IntRange(min=0),
              help="Known-item questions to hold out (thread-opening questions).")
@click.option("--seed", default=0, show_default=True, type=int,
              help="Which threads lend their questions.")
def dump_mail(sources: tuple[Path, ...], out: Path, queries: int, seed: int) -> None:
    """Write a forum dump from mbox files or folders of one-message files.

    Each mailing list becomes a category, each thread a topic, each message a post (its own
    words only). `sidecar import OUT` loads it; `sidecar eval --dump OUT` and `sidecar bench
    --dump OUT` measure search on it.
    """
    echo_json(write_dump(read_archive(sources), out, queries=queries, seed=seed).as_dict())
