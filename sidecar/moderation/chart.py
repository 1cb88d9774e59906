"""The zone chart of the moderator calibration page: inline SVG (the pages allow no script
and no image fetch), drawn from numbers only.

For one scorer, against the score threshold: the share of the questions its normal threshold
was read from (``sidecar calibrate``: the forum's opening posts, or its members' questions),
asked without the topic that answers them, that score at least that much, i.e.
the risk of a *normal* answer where the forum holds none; and, where moderators labelled
retrievals, the share of "should have answered" (coverage) and of "correct abstention" above
it. Vertical lines mark today's abstain and normal thresholds.
"""

from __future__ import annotations

from collections.abc import Sequence

from sidecar.core.answerability import ZoneCalibration
from sidecar.core.calibration import LabelledScore
from sidecar.core.zones import Thresholds

W, H, PAD = 560, 260, 40
COLOURS = {"calibration": "#b03a2e", "should_have_answered": "#1e8449",
           "correct_abstention": "#7d3c98"}


def _share_above(values: Sequence[float], t: float) -> float:
    return sum(1 for v in values if v >= t) / len(values) if values else 0.0


def zone_chart_svg(calibration: ZoneCalibration | None, labelled: Sequence[LabelledScore],
                   thresholds: Thresholds) -> str:
    """The chart as an ``<svg>`` element (only numbers and fixed words go into it)."""
    scores = [x.score for x in labelled if x.score is not None]
    ends = [thresholds.abstain, thresholds.normal, *scores]
    if calibration is not None:
        ends += [calibration.quantiles[0], calibration.quantiles[-1]]
    lo, hi = min(ends), max(ends)
    lo, hi = (lo - 0.05 * (hi - lo or 1), hi + 0.05 * (hi - lo or 1))

    def x(v: float) -> float:
        return PAD + (v - lo) / (hi - lo) * (W - 2 * PAD)

    def y(share: float) -> float:
        return H - PAD - share * (H - 2 * PAD)

    steps = [lo + (hi - lo) * i / 80 for i in range(81)]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
             f'viewBox="0 0 {W} {H}" role="img" class="zone-chart">',
             f'<rect x="{PAD}" y="{PAD}" width="{W - 2 * PAD}" height="{H - 2 * PAD}" '
             'fill="none" stroke="#999"/>']
    series: list[tuple[str, list[float]]] = []
    if calibration is not None:
        series.append(("calibration", [calibration.share_above(t) for t in steps]))
    for label in ("should_have_answered", "correct_abstention"):
        values = [x.score for x in labelled if x.label == label and x.score is not None]
        if values:
            series.append((label, [_share_above(values, t) for t in steps]))
    for name, shares in series:
        points = " ".join(f"{x(t):.1f},{y(s):.1f}" for t, s in zip(steps, shares, strict=True))
        parts.append(f'<polyline class="curve-{name}" fill="none" stroke="{COLOURS[name]}" '
                     f'stroke-width="2" points="{points}"/>')
    for name, value in (("abstain", thresholds.abstain), ("normal", thresholds.normal)):
        parts.append(f'<line class="threshold-{name}" x1="{x(value):.1f}" y1="{PAD}" '
                     f'x2="{x(value):.1f}" y2="{H - PAD}" stroke="#333" stroke-dasharray="4 3"/>'
                     f'<text x="{x(value) + 3:.1f}" y="{PAD + 12}" font-size="11">{name} '
                     f'{value:.3f}</text>')
    for share in (0.0, 0.5, 1.0):
        parts.append(f'<text x="4" y="{y(share) + 4:.1f}" font-size="10">{share:.0%}</text>')
    parts.append(f'<text x="{PAD}" y="{H - 10}" font-size="10">score {lo:.3f}</text>'
                 f'<text x="{W - PAD - 70}" y="{H - 10}" font-size="10">score {hi:.3f}</text>')
    parts.append("</svg>")
    return "".join(parts)
