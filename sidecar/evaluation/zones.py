"""`sidecar eval --part zones`: answer or abstain, measured where the forum holds no answer.

Three sides, each asked through the steps of ``POST /v1/retrieve`` (``RetrievalPipeline.assess``:
wide search, rerank when a cross-encoder is configured, zone score), nothing stored:

* **answerable**: the dump's judged queries, asked of the whole forum;
* **leave-out**: the relevant topics are split into ``folds`` folds (topics that share a
  query stay together); each fold's topics are hidden from both legs (no re-embedding) and the
  queries whose relevant topics all lie in it are asked: in domain, no answer here, with the
  rest of the forum (two thirds of it with 3 folds) still there;
* **out of domain**: the queries of other dumps (``--ood``), asked of this forum.

The zones come from the forum's own calibration (``sidecar calibrate``, run here as the product
runs it, on this forum's opening posts, before any label) and, for comparison, from the
settings' fixed thresholds. Each candidate signal gets its AUROC (answerable against each
unanswerable side, bootstrap CI) and a risk-coverage curve; a logistic regression over them is
trained and scored by cross-validation on the leave-out folds. docs/answerability.md.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from sidecar.answer.pipeline import RetrievalPipeline
from sidecar.answer.pipeline_types import Assessment
from sidecar.answer.zone_calibration import asked_scores, calibrate_zones
from sidecar.config.settings import Settings
from sidecar.core.answerability import Combined, ZoneCalibration, calibrate, top_keyword
from sidecar.core.calibration import zone_of
from sidecar.core.trace import Trace
from sidecar.core.types import Leg
from sidecar.core.zones import ScorerKind, Thresholds
from sidecar.evaluation.dataset import EvalQuery, load_dataset
from sidecar.evaluation.state import prepare_state
from sidecar.evaluation.zone_stats import (
    auroc_ci,
    auroc_difference_ci,
    cv_logistic,
    risk_coverage,
)

log = logging.getLogger(__name__)

SIGNALS: tuple[str, ...] = ("similarity", "fused", "keyword", "margin", "agree", "matched",
                            "words", "combined")
SIDES: tuple[str, ...] = ("answerable", "leave_out", "out_of_domain")
# The model leaves "matched" out: hiding a fold's topics shrinks the forum, which lowers every
# leave-out question's match count whatever the question (an artefact of the protocol).
# "combined" is a fixed function of two others (sidecar.core.answerability.Combined).
MODEL_SIGNALS: tuple[str, ...] = tuple(s for s in SIGNALS if s not in ("matched", "combined"))
MAX_OOD = 300  # out-of-domain questions asked per other dump (a seeded sample)
NOTHING = -1e6  # a cross-encoder's score where nothing was found (below any logit)


@dataclass
class Asked:
    """One question asked of the forum, on one side."""

    side: str
    query_id: str
    top: float | None  # the zone's score
    signals: dict[str, float]
    evidence_hit: bool  # a relevant topic among the kept evidence (answerable side)


def signals(assessed: Assessment, query: str) -> dict[str, float]:
    """The candidate answerability signals of one assessment (0 where a leg found nothing);
    with a cross-encoder, its score is ``rerank`` and ``similarity`` stays the cosine's."""
    topics = assessed.found.topics
    cosines = [c.topic.similarity for c in assessed.kept if c.topic.similarity is not None]
    fused = [t.score for t in topics[:2]] + [0.0, 0.0]

    def first(leg: str) -> int | None:
        return next((t.topic_id for t in topics for p in t.posts if p.ranks.get(leg) == 1),
                    None)

    keyword = top_keyword(topics)
    sem_first, kw_first = first(Leg.SEMANTIC), first(Leg.KEYWORD)
    reranked = ({"rerank": assessed.top if assessed.top is not None else NOTHING}
                if assessed.kind is ScorerKind.CROSS_ENCODER else {})
    return {
        **reranked,
        "similarity": max(cosines) if cosines else 0.0,
        "fused": fused[0],
        "keyword": keyword,
        "margin": fused[0] - fused[1],
        "agree": float(sem_first is not None and sem_first == kw_first),
        "matched": math.log1p(assessed.found.legs.get(Leg.KEYWORD, 0)),
        "words": math.log1p(len(query.split())),
    }


def ask(pipeline: RetrievalPipeline, side: str, query: EvalQuery | tuple[str, str], limit: int,
        max_chars: int, hidden: frozenset[int] = frozenset()) -> Asked:
    """Assess one question (an eval query, or an (id, text) pair of another dump)."""
    qid, text = (query.id, query.text) if isinstance(query, EvalQuery) else query
    text = " ".join(text.split())[:max_chars]
    assessed = pipeline.assess(text, limit, Trace(), hidden)
    relevant = {t for t, g in query.topics.items() if g >= 1} \
        if isinstance(query, EvalQuery) else set()
    hit = any(c.topic.topic_id in relevant for c in assessed.kept)
    return Asked(side=side, query_id=qid, top=assessed.top, signals=signals(assessed, text),
                 evidence_hit=hit)


def topic_folds(queries: Sequence[EvalQuery], k: int, seed: int
                ) -> list[tuple[frozenset[int], list[int]]]:
    """Split the queries' relevant topics into ``k`` folds, topics that share a query kept
    together; per fold, the hidden topics and the indices of the queries they answer."""
    parent: dict[int, int] = {}

    def root(t: int) -> int:
        while parent.setdefault(t, t) != t:
            parent[t] = parent[parent[t]]
            t = parent[t]
        return t

    relevant = [sorted(t for t, g in q.topics.items() if g >= 1) for q in queries]
    for topics in relevant:
        for t in topics[1:]:
            parent[root(t)] = root(topics[0])
    groups: dict[int, list[int]] = {}
    for i, topics in enumerate(relevant):
        groups.setdefault(root(topics[0]), []).append(i)
    keys = sorted(groups)
    random.Random(seed).shuffle(keys)
    folds: list[tuple[frozenset[int], list[int]]] = []
    for f in range(k):
        members = sorted(i for key in keys[f::k] for i in groups[key])
        folds.append((frozenset(t for i in members for t in relevant[i]), members))
    return [fold for fold in folds if fold[1]]


def zone_counts(asked: Sequence[Asked], limits: Thresholds,
                per_query: Mapping[str, Thresholds] | None = None) -> dict[str, Any]:
    """Zones of one side under ``limits`` (or a question's own, in ``per_query``), and the
    rates the issue's criteria read."""
    def limits_of(a: Asked) -> Thresholds:
        return (per_query or {}).get(a.query_id, limits)

    zones = [zone_of(a.top, limits_of(a)) if a.top is not None else "abstain" for a in asked]
    n = max(len(zones), 1)
    counts = {z: zones.count(z) for z in ("normal", "cautious", "abstain")}
    hits = [z for z, a in zip(zones, asked, strict=True) if a.evidence_hit]
    answered = [a for z, a in zip(zones, asked, strict=True) if z == "normal"]
    return {"n": len(zones), **counts,
            "normal_rate": round(counts["normal"] / n, 4),
            "cautious_or_abstain_rate": round((counts["cautious"] + counts["abstain"]) / n, 4),
            "abstain_rate": round(counts["abstain"] / n, 4),
            "normal_rate_when_evidence_hit": round(hits.count("normal") / max(len(hits), 1), 4),
            "evidence_hit_rate_of_normal": round(
                sum(a.evidence_hit for a in answered) / max(len(answered), 1), 4)}


def run_zones(settings: Settings, dump: Path, *, ood: Sequence[Path] = (), folds: int = 3,
              seed: int = 0, resamples: int = 2000, calibration_questions: int = 300,
              progress: bool = True, out_png: Path | None = None) -> dict[str, Any]:
    """The answerability evaluation of one dump; returns the result document."""
    started = time.perf_counter()
    dataset = load_dataset(dump.resolve())
    others = [(path, load_dataset(path.resolve())) for path in ood]
    state = prepare_state(settings, dump.resolve())
    try:
        res = state.resources
        pipeline = res.retrieval()
        limit, max_chars = res.settings.retrieve_limit, res.settings.max_query_chars
        # What a fresh forum gets: thresholds from its own questions, before any label.
        calibration = calibrate_zones(res, questions=calibration_questions, seed=seed,
                                      basis="opening_posts", progress=progress)
        cal = calibration.calibration
        queries = dataset.scored()
        asked: list[Asked] = []
        for q in tqdm(queries, desc="answerable", unit="query", disable=not progress):
            asked.append(ask(pipeline, "answerable", q, limit, max_chars))
        fold_of: dict[str, int] = {}
        for f, (hidden, members) in enumerate(topic_folds(queries, folds, seed)):
            for i in tqdm(members, desc=f"leave-out fold {f + 1}/{folds}", unit="query",
                          disable=not progress):
                fold_of[queries[i].id] = f
                asked.append(ask(pipeline, "leave_out", queries[i], limit, max_chars, hidden))
        # What the forum gets once its members have asked (`sidecar calibrate --basis asked`):
        # the normal threshold read from their questions, here the judged ones of the other
        # folds, each re-asked without the topic that answered it best (no label read).
        member_scores = asked_scores(
            pipeline, [" ".join(q.text.split())[:max_chars] for q in queries], limit,
            progress=progress)
        by_members = members_thresholds(calibration.scores, member_scores, queries, fold_of,
                                        cal)
        rng = random.Random(seed)
        for path, other in others:
            picked = list(other.queries)
            if len(picked) > MAX_OOD:
                picked = rng.sample(picked, MAX_OOD)
            for oq in tqdm(picked, desc=f"out of domain ({path.name})", unit="query",
                           disable=not progress):
                asked.append(ask(pipeline, "out_of_domain", (f"{path.name}:{oq.id}", oq.text),
                                 limit, max_chars))
        scorer = pipeline.assess("calibration check", limit, Trace()).scorer
        kind = scorer.split(":", 1)[0]
        # The zone's own score: the cross-encoder's when one is served, else the cosine.
        zone_signal = "rerank" if kind == "cross-encoder" else "similarity"
        # The label-free combination, standardised on the same calibration questions.
        combine = Combined.fit(calibration.scores, calibration.keyword)
        for a in asked:
            a.signals["combined"] = combine(a.signals[zone_signal], a.signals["keyword"])
        combined_cal = [combine(x, k) for x, k in zip(calibration.scores, calibration.keyword,
                                                      strict=True)]
        s = res.settings
        fixed = (Thresholds(s.zone_ce_abstain, s.zone_ce_normal) if kind == "cross-encoder"
                 else Thresholds(s.zone_cos_abstain, s.zone_cos_normal))
        calibrated = Thresholds(cal.abstain, cal.normal)
        by_side = {side: [a for a in asked if a.side == side] for side in SIDES}
        doc: dict[str, Any] = {
            "meta": {"dump": str(dump), "ood": [str(p) for p in ood], "folds": folds,
                     "seed": seed, "scorer": scorer, "queries": len(queries),
                     "resamples": resamples, "duration_s": round(time.perf_counter() - started)},
            "thresholds": {"settings": {"abstain": fixed.abstain, "normal": fixed.normal},
                           "calibrated": {"abstain": cal.abstain, "normal": cal.normal,
                                          "abstain_pct": cal.abstain_pct,
                                          "normal_pct": cal.normal_pct,
                                          "questions": cal.questions},
                           **({"members": by_members[2]} if by_members else {})},
            "zones": {name: {side: zone_counts(rows, limits, per_query)
                             for side, rows in by_side.items() if rows}
                      for name, limits, per_query in (
                          ("settings", fixed, None), ("calibrated", calibrated, None),
                          *((("members' questions", by_members[1], by_members[0]),)
                            if by_members else ()))},
            "auroc": _auroc(by_side, resamples, seed),
            **({"auroc_rerank_minus_cosine": _rerank_gain(by_side, resamples, seed)}
               if zone_signal == "rerank" else {}),
            "logistic": cv_logistic(by_side["answerable"], by_side["leave_out"], fold_of,
                                    _present(asked, MODEL_SIGNALS), seed),
            "tradeoff": tradeoff(calibration.scores, by_side, zone_signal),
            "tradeoff_combined": tradeoff(combined_cal, by_side, "combined"),
            "risk_coverage": {sig: risk_coverage(
                [a.signals[sig] for a in by_side["answerable"]],
                [a.signals[sig] for a in by_side["leave_out"] + by_side["out_of_domain"]])
                for sig in _present(asked, ("rerank", "similarity", "fused", "keyword",
                                            "combined"))},
            "per_query": [{"side": a.side, "query_id": a.query_id, "top": a.top,
                           "evidence_hit": a.evidence_hit,
                           **{k: round(v, 6) for k, v in a.signals.items()}} for a in asked],
        }
        if out_png is not None:
            try:
                # matplotlib is optional (the dev extra): imported only when a chart is asked.
                from sidecar.evaluation.zone_chart import write_chart
            except ImportError:
                log.warning("matplotlib is not installed: no chart (pip install '.[dev]')")
            else:
                doc["meta"]["png"] = str(write_chart(doc, out_png))
        return doc
    finally:
        state.close()


def members_thresholds(own: Sequence[float], members: Sequence[float | None],
                       queries: Sequence[EvalQuery], fold_of: Mapping[str, int],
                       cal: ZoneCalibration
                       ) -> tuple[dict[str, Thresholds], Thresholds, dict[str, Any]] | None:
    """Thresholds read from members' questions, held out by fold: each fold's questions get
    the normal threshold of the other folds' ``members`` scores (the abstain one stays the
    opening posts'); the questions of no fold and other dumps' get the one of all. None when
    too few are scored."""
    def limits(fold: int | None) -> Thresholds:
        scores = [s for q, s in zip(queries, members, strict=True)
                  if s is not None and (fold is None or fold_of.get(q.id) != fold)]
        c = calibrate(own, scorer=cal.scorer, created_at=cal.created_at,
                      abstain_pct=cal.abstain_pct, normal_pct=cal.normal_pct, asked=scores)
        return Thresholds(c.abstain, c.normal)

    try:
        every = limits(None)
        per_fold = {f: limits(f) for f in sorted(set(fold_of.values()))}
    except ValueError as exc:
        log.warning("no thresholds from the members' questions: %s", exc)
        return None
    per_query = {qid: per_fold[f] for qid, f in fold_of.items()}
    report = {"abstain": every.abstain, "normal": every.normal, "normal_pct": cal.normal_pct,
              "normal_by_fold": [per_fold[f].normal for f in sorted(per_fold)],
              "questions": sum(s is not None for s in members)}
    return per_query, every, report


NORMAL_PCTS = (40, 50, 60, 70, 80)
ABSTAIN_PCTS = (5, 10, 15)


def tradeoff(scores: Sequence[float], by_side: dict[str, list[Asked]],
             signal: str = "similarity") -> dict[str, Any]:
    """What other calibration percentiles would give: per normal percentile, the answerable
    questions (with a relevant topic in the evidence) kept normal and the leave-out ones sent to
    cautious or abstain; per abstain percentile, the out-of-domain and the answerable ones that
    abstain (``sidecar calibrate --normal-pct / --abstain-pct``). ``scores`` are the
    calibration questions' values of ``signal``."""
    def below(rows: Sequence[Asked], t: float) -> float | None:
        return round(sum(a.signals[signal] < t for a in rows) / len(rows), 4) if rows else None

    answered = [a for a in by_side["answerable"] if a.evidence_hit]
    normal = {}
    for pct in NORMAL_PCTS:
        t = float(np.percentile(scores, pct))
        held = below(answered, t)
        normal[str(pct)] = {"threshold": round(t, 6),
                            "answerable_normal": None if held is None else round(1 - held, 4),
                            "leave_out_held_back": below(by_side["leave_out"], t)}
    abstain = {}
    for pct in ABSTAIN_PCTS:
        t = float(np.percentile(scores, pct))
        abstain[str(pct)] = {"threshold": round(t, 6),
                             "out_of_domain_abstain": below(by_side["out_of_domain"], t),
                             "answerable_abstain": below(by_side["answerable"], t)}
    return {"normal": normal, "abstain": abstain}


def _auroc(by_side: dict[str, list[Asked]], resamples: int, seed: int) -> dict[str, Any]:
    """AUROC of each signal, answerable against each unanswerable side (with bootstrap CI)."""
    out: dict[str, Any] = {}
    pos = by_side["answerable"]
    for side in ("leave_out", "out_of_domain"):
        neg = by_side[side]
        if not pos or not neg:
            continue
        out[side] = {sig: auroc_ci([a.signals[sig] for a in pos], [a.signals[sig] for a in neg],
                                   resamples=resamples, seed=seed)
                     for sig in _present(pos + neg, ("rerank", *SIGNALS))}
    return out


def _present(rows: Sequence[Asked], names: Sequence[str]) -> tuple[str, ...]:
    """The signals among ``names`` that every row has (``rerank`` only with a cross-encoder)."""
    return tuple(n for n in names if rows and all(n in a.signals for a in rows))


def _rerank_gain(by_side: dict[str, list[Asked]], resamples: int, seed: int) -> dict[str, Any]:
    """AUROC of the reranker's score minus the cosine's, answerable against each unanswerable
    side, with a paired bootstrap CI (the same questions resampled for both)."""
    pos = by_side["answerable"]
    return {side: auroc_difference_ci(
                [(a.signals["rerank"], a.signals["similarity"]) for a in pos],
                [(a.signals["rerank"], a.signals["similarity"]) for a in by_side[side]],
                resamples=resamples, seed=seed)
            for side in ("leave_out", "out_of_domain") if pos and by_side[side]}

