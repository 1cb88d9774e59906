"""Replay the served fusion's keyword lift over judged sets, and choose it by cross-validation.

Each set's queries run both legs once through the product's search (``SearchService``: the
same legs, 100 posts each, the stored similarity of posts only the keyword leg found); the
fusion and topic aggregation are then replayed (``sidecar.core.ranking.rank_topics``) for every
lift of the grid, and MRR@10 is compared, query by query, with each leg alone (paired bootstrap
95% CI). Last, the lift is chosen leaving one set out (the largest lower CI bound of
"served - semantic" over the other sets) and scored on the set left out.

Usage (after `make eval` has prepared the states; a few minutes on 2 vCPUs):

    .venv/bin/python scripts/fusion_replay.py [--lifts 0.005,0.01,...] [--resamples 2000]

The sets: the eval forum as one text and as title + body, the demo forum, the mail forum
(scripts/mail-forum.sh) and covidfaq. docs/search.md, "How 0.02 was chosen".
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from sidecar.config.settings import Settings
from sidecar.core.fusion import Fusion, FusionMethod
from sidecar.core.ranking import rank_topics
from sidecar.core.searchconfig import SearchConfig
from sidecar.core.trace import Trace
from sidecar.core.types import Leg, Mode, PostHit
from sidecar.db.evidence_read import post_similarities
from sidecar.evaluation import metrics as m
from sidecar.evaluation.dataset import load_dataset
from sidecar.evaluation.state import prepare_state

ROOT = Path(__file__).resolve().parents[1]
SETS: dict[str, tuple[Path, str]] = {
    "qatarliving": (ROOT.parent / "shared/eval/qatarliving", "text"),
    "qatarliving-titled": (ROOT.parent / "shared/eval/qatarliving", "subject+body"),
    "demo": (ROOT / "sidecar/demo", "text"),
    "mail": (ROOT / ".sidecar/mail-forum/dump", "text"),
    "covidfaq": (ROOT.parent / "shared/eval/covidfaq", "text"),
}
POST_K = 100


@dataclass
class Legs:
    """One query's leg rankings and its judged topics."""

    rankings: dict[str, list[PostHit]]
    similarities: dict[int, float]
    relevant: dict[int, int]


def collect(name: str) -> list[Legs]:
    """Run both legs once for every judged query of a set."""
    dump, fields = SETS[name]
    dataset = load_dataset(dump.resolve(), fields)
    state = prepare_state(Settings(), dump.resolve(), progress=False)
    res = state.resources
    svc = res.search
    out = []
    try:
        for q in dataset.scored():
            text = svc.check_query(q.text[: res.settings.max_query_chars])
            details = svc.check_details(q.details)
            vector = res.embedder.embed([f"{text} {details}" if details else text],
                                        kind="query")[0]
            rankings = svc.leg_rankings(text, vector, (Leg.SEMANTIC, Leg.KEYWORD), POST_K,
                                        res.settings.strategy, Trace())
            seen = {h.post_id for h in rankings[Leg.SEMANTIC]}
            missing = [h.post_id for h in rankings[Leg.KEYWORD] if h.post_id not in seen]
            with res.db.connection() as conn:
                sims = post_similarities(conn, model_id=res.model.id,
                                         strategy_id=res.settings.strategy,
                                         dimensions=res.model.dimensions, vector=vector,
                                         post_ids=missing)
            out.append(Legs(rankings, sims, dict(q.topics)))
    finally:
        state.close()
    return out


def rr(legs: Legs, config: SearchConfig) -> float:
    """Reciprocal rank at 10 of the first relevant topic under ``config``."""
    rankings = {leg: hits for leg, hits in legs.rankings.items() if leg in config.legs()}
    topics = rank_topics(rankings, config, similarities=legs.similarities)
    return m.reciprocal_rank([t.topic_id for t in topics], legs.relevant, 10)


def main() -> None:
    """Print the grid and the leave-one-set-out choice."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lifts", default="0.005,0.01,0.015,0.02,0.025,0.03,0.04")
    parser.add_argument("--resamples", type=int, default=2000)
    args = parser.parse_args()
    lifts = [float(x) for x in args.lifts.split(",")]
    data = {name: collect(name) for name in SETS}
    semantic, keyword = SearchConfig(Mode.SEMANTIC), SearchConfig(Mode.KEYWORD)
    ci: dict[tuple[float, str], m.PairedComparison] = {}
    print("| lift | " + " | ".join(f"{n}: served - semantic / - keyword" for n in SETS) + " |")
    for lift in lifts:
        config = SearchConfig(Mode.HYBRID, Fusion(FusionMethod.LIFT, lift=lift))
        row = []
        for name, queries in data.items():
            served = [rr(q, config) for q in queries]
            vs_sem = m.compare(served, [rr(q, semantic) for q in queries],
                               resamples=args.resamples)
            vs_kw = m.compare(served, [rr(q, keyword) for q in queries],
                              resamples=args.resamples)
            ci[(lift, name)] = vs_sem
            flag = "" if vs_sem.ci_high >= 0 and vs_kw.ci_high >= 0 else " !"
            row.append(f"{vs_sem.mean_diff:+.3f} [{vs_sem.ci_low:+.3f}, {vs_sem.ci_high:+.3f}]"
                       f" / {vs_kw.mean_diff:+.3f}{flag}")
        print(f"| {lift:g} | " + " | ".join(row) + " |")
    print("\nLeave one set out (lift with the largest lower CI bound over the other sets):")
    for held in SETS:
        others = [n for n in SETS if n != held]
        best = max(lifts, key=lambda lift: min(ci[(lift, n)].ci_low for n in others))
        c = ci[(best, held)]
        print(f"- {held}: lift {best:g} -> {c.mean_diff:+.3f} [{c.ci_low:+.3f}, {c.ci_high:+.3f}]")


if __name__ == "__main__":
    main()
