"""Benchmark tables: what every part returns, written as JSON and Markdown."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sidecar.config.settings import Settings


@dataclass
class BenchTable:
    """One table of results. ``rows`` hold plain values (numbers rounded by the part)."""

    part: str
    title: str
    columns: list[str]
    rows: list[list[Any]]
    notes: list[str] = field(default_factory=list)

    def to_markdown(self) -> str:
        """A GitHub-flavoured Markdown table with its title and notes."""
        lines = [f"### {self.title}", "", "| " + " | ".join(self.columns) + " |",
                 "|" + "---|" * len(self.columns)]
        lines += ["| " + " | ".join(_cell(v) for v in row) + " |" for row in self.rows]
        if self.notes:
            lines.append("")
            lines += [f"- {note}" for note in self.notes]
        return "\n".join(lines) + "\n"


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3g}" if abs(value) < 100 else f"{value:,.0f}"
    return "" if value is None else str(value)


@dataclass
class BenchContext:
    """What a part gets: settings, where to write, and whether to run the quick variant."""

    settings: Settings
    out_dir: Path
    quick: bool = False
    extras: dict[str, Any] = field(default_factory=dict)


def write_report(out_dir: Path, tables: list[BenchTable], meta: dict[str, Any]) -> Path:
    """Write ``results.json`` and ``summary.md`` under ``out_dir``; returns the summary path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(json.dumps(
        {"meta": meta, "tables": [asdict(t) for t in tables]}, indent=2, default=str))
    header = [f"# Benchmarks ({meta.get('started', '')})", "",
              f"Machine: {meta['machine']['cpu']}, {meta['machine']['logical_cpus']} logical CPUs.",
              f"Command: `{meta.get('command', 'sidecar bench')}`", ""]
    summary = out_dir / "summary.md"
    summary.write_text("\n".join(header) + "\n".join(t.to_markdown() for t in tables))
    return summary
