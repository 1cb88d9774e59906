"""The answerability evaluation's chart: risk-coverage per signal, zones per side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def write_chart(doc: dict[str, Any], path: Path) -> Path:
    """Risk against coverage for each signal (the calibrated thresholds marked), and the share
    of each side in each zone under the calibrated and the settings' thresholds."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5))
    for signal, curve in doc["risk_coverage"].items():
        left.plot([p["coverage"] for p in curve], [p["risk"] for p in curve], marker=".",
                  label=signal)
    left.set_xlabel("coverage (share of all questions answered normally)")
    left.set_ylabel("risk (share of those with no answer on this forum)")
    left.set_title(f"{Path(doc['meta']['dump']).name}: risk-coverage")
    left.legend()
    zones = doc["zones"]
    labels, normal, cautious, abstain = [], [], [], []
    for name in ("settings", "calibrated"):
        for side, counts in zones[name].items():
            n = max(counts["n"], 1)
            labels.append(f"{side}\n{name}")
            normal.append(counts["normal"] / n)
            cautious.append(counts["cautious"] / n)
            abstain.append(counts["abstain"] / n)
    xs = range(len(labels))
    right.bar(xs, normal, label="normal", color="tab:green")
    right.bar(xs, cautious, bottom=normal, label="cautious", color="tab:orange")
    right.bar(xs, abstain, bottom=[a + b for a, b in zip(normal, cautious, strict=True)],
              label="abstain", color="tab:red")
    right.set_xticks(list(xs), labels, fontsize=7)
    right.set_ylabel("share of questions")
    right.set_title("zones per side: settings' thresholds vs calibrated on the forum")
    right.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
