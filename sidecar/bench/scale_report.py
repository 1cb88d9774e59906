"""The scale benchmark's outputs: ``scale.json`` (rows + meta), ``scale.md`` and ``scale.png``.

Everything is rewritten after each row, so a run stopped part-way keeps what it measured.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sidecar.bench.report import BenchTable

# Deferred imports (optional dependency): matplotlib, only to draw the chart.

log = logging.getLogger(__name__)

COLUMNS = ["posts", "private", "stage", "dims", "index", "config", "p50 ms", "p95 ms",
           "CPU ms", "recall@10", "ε-recall@10", "build s", "size MB"]


def config_label(row: dict[str, Any]) -> str:
    """Short form of a row's knobs: m/efc, ef_search, scan order, overfetch."""
    c = row.get("config") or {}
    if not c:
        return ""
    if "max_words" in c:  # the keyword leg
        words = f"rarest {c['max_words']} words" if c["max_words"] else "every word"
        return words + (" *" if row.get("default") else "")
    if "library" in c:  # an index beside pgvector's (scale_alt.py)
        return f"{c['library']} m{c['m']}/efc{c['ef_construction']} ef{row.get('ef_search')}"
    ef = f"ef{c['ef_search_min']}"
    if row.get("ef_search") not in (None, c["ef_search_min"]):
        # Scaled by the index's public share (sidecar/db/vector_share.py): what the scan used.
        ef += f"→{row['ef_search']}"
    parts = [f"m{c['m']}/efc{c['ef_construction']}", ef, c["scan_order"].replace("_order", "")]
    if c.get("max_scan_tuples") not in (None, 20_000):
        parts.append(f"max{c['max_scan_tuples']}")
    if "overfetch" in c:
        parts.append(f"x{c['overfetch']}")
    if "parallel_legs" in c:  # a hybrid row
        parts.append("legs at once" if c["parallel_legs"] else "legs in turn")
    if row.get("vectors") == "public":
        parts.append("public vectors only")
    return " ".join(parts) + (" *" if row.get("default") else "")


def _round(value: Any, digits: int) -> Any:
    return None if value is None else round(float(value), digits)


@dataclass
class ScaleReport:
    """Rows as they come, and where they are written."""

    out_dir: Path
    meta: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(self, row: dict[str, Any]) -> None:
        """Keep a row and rewrite every output."""
        for key in ("p50_ms", "p95_ms", "build_s", "size_mb", "cpu_ms", "load"):
            row[key] = _round(row.get(key), 2)
        row["recall_at_10"] = _round(row.get("recall_at_10"), 4)
        self.rows.append(row)
        self.write()

    def write(self, chart: bool = False) -> None:
        """scale.json and scale.md (and scale.png when ``chart``)."""
        self.out_dir.mkdir(parents=True, exist_ok=True)
        (self.out_dir / "scale.json").write_text(
            json.dumps({"meta": self.meta, "rows": self.rows}, indent=1, default=str))
        (self.out_dir / "scale.md").write_text(self.table().to_markdown())
        if chart:
            try:
                write_chart(self.rows, self.out_dir / "scale.png")
            except ImportError:
                log.warning("matplotlib is missing: no scale.png (pip install '.[dev]')")

    def table(self) -> BenchTable:
        """The rows as a Markdown table (``*``: the product's default settings)."""
        body = [[r["posts"], r["private_share"], r["stage"], r.get("dims"), r.get("index"),
                 config_label(r), r["p50_ms"], r["p95_ms"], r.get("cpu_ms"), r.get("recall_at_10"),
                 r.get("epsilon_recall_at_10"), r.get("build_s"), r.get("size_mb")]
                for r in self.rows]
        notes = [str(n) for n in self.meta.get("notes", [])]
        return BenchTable("scale", "Search at forum scale", COLUMNS, body, notes)


def write_chart(rows: list[dict[str, Any]], path: Path) -> None:
    """p95 latency and index build time against forum size, one line per stage (defaults)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # The settings' own rows, with a vector for every post (a --vectors public run is apart);
    # a run of public vectors only charts those.
    kind = "all" if any(r.get("vectors", "all") == "all" for r in rows) else "public"
    default = [r for r in rows if r.get("default", True) and r.get("vectors", "all") == kind]
    series: dict[str, list[dict[str, Any]]] = {}
    for r in default:
        label = r["stage"] if r["stage"] == "keyword" else f"{r['stage']} {r['dims']} {r['index']}"
        if all(p["posts"] != r["posts"] for p in series.get(label, [])):  # a size once: the first
            series.setdefault(label, []).append(r)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = plt.get_cmap("tab10")
    for number, (label, points) in enumerate(sorted(series.items())):
        points = sorted(points, key=lambda r: r["posts"])
        xs = [p["posts"] for p in points]
        style = "-" if label.startswith("hybrid") else "--" if label == "keyword" else ":"
        color = colors(number % 10)  # the same series has the same colour in both panels
        ax1.plot(xs, [p["p95_ms"] for p in points], style, marker="o", label=label, color=color)
        if not label.startswith("hybrid") and all(p.get("build_s") for p in points):
            ax2.plot(xs, [p["build_s"] for p in points], style, marker="o", label=label,
                     color=color)
    for ax, title in ((ax1, "p95 latency (ms, server side)"), (ax2, "index build (s)")):
        ax.set_xscale("log")
        ax.set_xlabel("posts in the forum")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:  # rows without a build time draw no line
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def row_key(row: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two runs' rows the same measurement: size, stage, index and knobs."""
    return (row["posts"], row["stage"], row.get("dims"), row.get("index"), row.get("vectors"),
            json.dumps(row.get("config") or {}, sort_keys=True))


def median_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per measurement of several runs: the run whose p95 is the median (the lower
    middle of an even count), so its other figures are one run's, not a blend; ``runs``
    counts the runs and ``p95_ms_runs`` lists their p95s, the spread."""
    groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(row_key(row), []).append(row)
    out = []
    for same in groups.values():
        ranked = sorted(same, key=lambda r: r["p95_ms"])
        middle = dict(ranked[(len(ranked) - 1) // 2])
        middle["runs"] = len(same)
        middle["p95_ms_runs"] = [r["p95_ms"] for r in same]
        out.append(middle)
    return out


def merge(paths: list[Path], out_dir: Path, medians: bool = False) -> ScaleReport:
    """One report from the ``scale.json`` of several runs (e.g. the smaller sizes and the 1M
    run, measured apart): rows in order, meta per run; with ``medians``, repeated runs of the
    same measurement become their median row (:func:`median_rows`)."""
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    for path in paths:
        data = json.loads(path.read_text())
        for row in data["rows"]:  # runs before rows said so
            row.setdefault("vectors", data["meta"].get("vectors", "all"))
        rows += data["rows"]
        runs.append(data["meta"])
    notes = list(runs[0].get("notes", [])) if runs else []
    if medians:
        rows = median_rows(rows)
        notes.append("each row: the run of the median p95 among the runs that measured it "
                     "(runs: how many; p95_ms_runs: each one's p95).")
    report = ScaleReport(out_dir, {"runs": runs, "notes": notes})
    report.rows = sorted(rows, key=lambda r: r["posts"])  # stable: each run's order kept
    report.write(chart=True)
    return report


if __name__ == "__main__":  # python -m sidecar.bench.scale_report [--medians] A/scale.json … OUT
    import sys

    args = sys.argv[1:]
    medians = "--medians" in args
    *inputs, target = [a for a in args if a != "--medians"]
    print(merge([Path(p) for p in inputs], Path(target), medians).table().to_markdown())
