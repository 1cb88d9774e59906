"""`sidecar eval-related`: related topics and the composer's similar topics, measured.

Protocol (issue 24). Each judged query of the dump is added to a copy of the forum as a topic
of its own (:mod:`sidecar.evaluation.related_dump`); then, per query:

* ``/v1/topics/<id>/related`` of its topic (each mode: hybrid, semantic), the other queries'
  topics left out (they are not part of the judged forum);
* ``/v1/search`` with the same text, the subject as query and the body as details, the same
  topics left out: the baseline, paired query by query;
* ``/v1/similar`` with the subject as title and the body as raw: its ranked candidates and
  their similarities, from which each threshold's answer is read.

Scored against ``qrels_topic.tsv`` (Hit@1, Hit@5, MRR@10; relevant = grade >= 1), with paired
bootstrap CIs. The composer's thresholds are the forum's calibrated zones, calibrated here as
``sidecar calibrate`` does (its opening posts asked without their topic, the query topics left
out too), and the settings' fixed ones; each is also read on the questions of other dumps
(``--ood``), which the forum cannot answer: how often it stays silent there.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from sidecar.config.settings import Settings
from sidecar.core.answerability import (
    QUANTILE_STEP,
    ZoneCalibration,
    calibrate,
    pseudo_question,
)
from sidecar.core.trace import Trace
from sidecar.db.calibration_read import opening_posts
from sidecar.errors import InvalidInput
from sidecar.evaluation import related_stats as rs
from sidecar.evaluation.dataset import EvalDataset, EvalQuery, load_dataset
from sidecar.evaluation.related_dump import seed_from_original, write_related_dump
from sidecar.evaluation.state import prepare_state
from sidecar.related.service import RelatedService
from sidecar.related.similar import SimilarService
from sidecar.runtime.resources import Resources
from sidecar.search.service import SearchOptions

log = logging.getLogger(__name__)

MODES = ("hybrid", "semantic")


def load_questions(dump: Path) -> EvalDataset:
    """A dump's queries as topics are written: subject and body when it has them."""
    try:
        return load_dataset(dump, "subject+body")
    except InvalidInput:  # a dump without subjects: its text is the title
        return load_dataset(dump, "text")


def label(dump: Path) -> str:
    """A dump's name in the report (its folder, or the folder above a folder named dump)."""
    path = dump.resolve()
    return path.parent.name if path.name == "dump" else path.name


def calibrate_hidden(res: Resources, hidden: frozenset[int], questions: int, seed: int
                     ) -> ZoneCalibration:
    """``sidecar calibrate``'s procedure on this forum, with ``hidden`` topics left out."""
    pipeline = res.retrieval()
    with res.db.connection() as conn:
        sample = opening_posts(conn, questions, seed)
    scores = []
    for post in sample:
        query = pseudo_question(post.title, post.text, res.settings.max_query_chars)
        assessed = pipeline.assess(query, res.settings.retrieve_limit, Trace(),
                                   hidden | {post.topic_id})
        if assessed.top is not None:
            scores.append(assessed.top)
    return calibrate(scores, scorer=f"bi-encoder:{res.model.name}",
                     created_at=datetime.now(UTC).isoformat(timespec="seconds"))


def ask_all(res: Resources, queries: list[EvalQuery], topics: dict[str, int],
            hidden: frozenset[int], progress: bool) -> dict[str, Any]:
    """Every judged query through related (each mode), search and similar's candidates."""
    related = {mode: RelatedService(res, mode=mode) for mode in MODES}
    similar = SimilarService(res)
    lists: dict[str, list[list[int]]] = {f"related_{mode}": [] for mode in MODES}
    lists["search"] = []
    ms: dict[str, list[float]] = {name: [] for name in lists}
    candidates: list[rs.Candidates] = []
    for q in tqdm(queries, desc="related / search / similar", unit="query",
                  disable=not progress):
        topic = topics[q.id]
        for mode, service in related.items():
            t0 = time.perf_counter()
            out = service.related(topic, rs.DEPTH, exclude=hidden - {topic})
            ms[f"related_{mode}"].append((time.perf_counter() - t0) * 1000)
            lists[f"related_{mode}"].append([r["topic_id"] for r in out.results])
        t0 = time.perf_counter()
        results, _ = res.search.search(q.text, rs.DEPTH, SearchOptions(exclude_topics=hidden),
                                       details=q.details)
        ms["search"].append((time.perf_counter() - t0) * 1000)
        lists["search"].append([r.topic.topic_id for r in results])
        found = similar.rank(q.text, q.details, rs.DEPTH, exclude=hidden)
        candidates.append([(t.topic_id, t.similarity) for t in found.topics[:rs.DEPTH]])
    return {"lists": lists, "ms": ms, "candidates": candidates}


def ask_elsewhere(res: Resources, dataset: EvalDataset, hidden: frozenset[int], max_n: int,
                  progress: bool) -> list[rs.Candidates]:
    """Another dump's questions through similar (its candidates)."""
    similar = SimilarService(res)
    picked = list(dataset.queries)[:max_n] if max_n > 0 else list(dataset.queries)
    out = []
    limit = res.settings.max_query_chars
    for q in tqdm(picked, desc=f"elsewhere ({dataset.directory.name})", unit="query",
                  disable=not progress):
        found = similar.rank(" ".join(q.text.split())[:limit], q.details, rs.DEPTH,
                             exclude=hidden)
        out.append([(t.topic_id, t.similarity) for t in found.topics[:rs.DEPTH]])
    return out


def run_related_eval(settings: Settings, dump: Path, *, ood: tuple[Path, ...] = (),
                     calibration_questions: int = 300, seed: int = 0,
                     resamples: int = 10_000, max_ood: int = 0,
                     progress: bool = True) -> dict[str, Any]:
    """The whole evaluation of one dump; returns the result document."""
    started = time.perf_counter()
    dump = dump.resolve()
    dataset = load_questions(dump)
    queries = dataset.scored()
    copy = write_related_dump(dump, list(dataset.queries),
                              settings.state_dir / "eval" / "related-dumps")
    seeded = seed_from_original(settings, dump, copy.directory)
    log.info("related evaluation forum: %s (%s)", copy.directory, seeded)
    state = prepare_state(settings, copy.directory, progress=progress)
    try:
        res = state.resources
        hidden = copy.query_topics
        asked = ask_all(res, queries, copy.topics, hidden, progress)
        cal = calibrate_hidden(res, hidden, calibration_questions, seed)
        others = {label(path): ask_elsewhere(res, load_questions(path.resolve()), hidden,
                                           max_ood, progress) for path in ood}
    finally:
        state.close()
    qrels = [q.topics for q in queries]
    systems = {name: rs.system_row(name, lists, qrels)
               for name, lists in asked["lists"].items()}
    comparisons = [rs.comparison(systems[f"related_{mode}"], systems["search"], resamples, seed)
                   for mode in MODES]
    comparisons.append(rs.comparison(systems["related_hybrid"], systems["related_semantic"],
                                     resamples, seed))
    s = settings
    thresholds = {"abstain": cal.abstain, "normal": cal.normal,
                  "settings_abstain": s.zone_cos_abstain, "settings_normal": s.zone_cos_normal}
    rows = [rs.threshold_row(name, value, asked["candidates"], qrels, others)
            for name, value in thresholds.items()]
    similar_vs_search = []
    for row in rows:
        pseudo = {"system": f"similar@{row['threshold']}", "series": row["series"]}
        similar_vs_search.append(rs.comparison(pseudo, systems["search"], resamples, seed))
    chosen = rs.choose_threshold(rows, ("abstain", "normal"))
    uncalibrated = rs.choose_threshold(rows, ("settings_abstain", "settings_normal"))
    for row in rows:
        row.pop("series")
    # Per-query series stay in the document apart: a later run compares with them, query by
    # query (`sidecar eval --train-embedder`, before and after).
    series = {name: row.pop("series") for name, row in systems.items()}
    return {
        "meta": {"dump": str(dump), "forum_copy": str(copy.directory), "seeded": seeded,
                 "ood": [str(p) for p in ood], "queries": len(queries),
                 "model": state.resources.model.name, "strategy": s.strategy,
                 "seed": seed, "resamples": resamples, "depth": rs.DEPTH,
                 "duration_s": round(time.perf_counter() - started, 1)},
        "related": {"systems": list(systems.values()), "comparisons": comparisons,
                    "latency": {name: rs.latency(v) for name, v in asked["ms"].items()},
                    "series": series},
        "similar": {
            "calibration": {"abstain": cal.abstain, "normal": cal.normal,
                            "abstain_pct": cal.abstain_pct, "normal_pct": cal.normal_pct,
                            "questions": cal.questions},
            "thresholds": rows, "vs_search": similar_vs_search, "chosen": chosen,
            "chosen_uncalibrated": uncalibrated,
            "silence_target": rs.SILENCE_TARGET,
            "curve": rs.quantile_curve(asked["candidates"], qrels, others, cal.quantiles,
                                       QUANTILE_STEP),
            "elsewhere_questions": {name: len(c) for name, c in others.items()},
        },
    }
