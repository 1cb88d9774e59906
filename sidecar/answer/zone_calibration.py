"""`sidecar calibrate`: zone thresholds from the forum's own questions (the adapter).

Each sampled opening post is asked of the forum as a member's question, with its own topic
hidden from both legs, through the same steps as ``POST /v1/retrieve`` (wide search, rerank when
a cross-encoder is configured, zone score); the scores go to the pure calibration
(:mod:`sidecar.core.answerability`). Nothing is stored but the thresholds, in the search
profile, which every API node reads at start-up.

The members' questions are read through :mod:`sidecar.core.zone_guard` (a few per asker,
near-duplicates once, enough askers), and a calibration that would move a threshold past its
bound is returned with its ``problems``: the caller records it as pending instead of serving
it. The opening posts are drawn with a random seed unless one is given (recorded either way).

A model tuned on this forum (``sidecar train-embedder``) is calibrated only on the topics it
never read (held out when it trained, listed in its manifest): it learned to set the topics it
read apart from each other, so their opening posts, asked without their topic, score lower than
a new member's question does, and thresholds read from them would let off-topic questions
through (docs/answerability.md).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal, Protocol

import numpy as np
from tqdm import tqdm

from models.errors import ModelLoadError
from models.manifest import read_manifest
from sidecar.answer.pipeline import RetrievalPipeline
from sidecar.answer.pipeline_types import Assessment, PipelineResources
from sidecar.config.settings import Settings
from sidecar.core.answerability import (
    MIN_QUESTIONS,
    ZoneCalibration,
    calibrate,
    pseudo_question,
    top_keyword,
)
from sidecar.core.trace import Trace
from sidecar.core.zone_guard import (
    WINDOW_DAYS,
    Bounds,
    MemberQuestion,
    askers,
    distinct,
    move_problems,
    per_asker,
)
from sidecar.db.calibration_read import asked_questions, opening_posts
from sidecar.search.profile import profile_zones, update_profile, with_pending, with_zones

log = logging.getLogger(__name__)

DEFAULT_QUESTIONS = 300
# Distinct questions (after the guards) from which "auto" reads the normal threshold from the
# members' questions.
MIN_ASKED = 100
# Stored questions read, and embedded to find near-duplicates, per question wanted.
READ_PER_QUESTION = 20
EMBED_PER_QUESTION = 10
Basis = Literal["auto", "opening_posts", "asked"]


class CalibrationResources(PipelineResources, Protocol):
    """What the calibration takes of the process's resources (``Resources`` is one): the
    pipeline's parts, and the pipeline itself."""

    def retrieval(self) -> RetrievalPipeline:
        """The process's retrieval pipeline."""
        ...


@dataclass
class CalibrationRun:
    """The calibration and what it read."""

    calibration: ZoneCalibration
    scores: list[float]
    seconds: float
    keyword: list[float] = field(default_factory=list)  # the keyword leg's best, per score
    unscored: int = 0
    before: dict[str, float] = field(default_factory=dict)
    askers: int = 0  # distinct askers behind the members' questions read
    # Why it moves past its bound (empty: within it): then it is pending, not served.
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """JSON report (``sidecar calibrate --json``)."""
        c = self.calibration
        return {"scorer": c.scorer, "abstain": c.abstain, "normal": c.normal,
                "abstain_pct": c.abstain_pct, "normal_pct": c.normal_pct,
                "questions": c.questions, "basis": c.basis, "asked": c.asked,
                "askers": self.askers, "seed": c.seed,
                "unscored": self.unscored, "created_at": c.created_at,
                "quantiles": list(c.quantiles), "problems": self.problems,
                "before": self.before, "seconds": round(self.seconds, 1)}


def asked_scores(pipeline: RetrievalPipeline, texts: Sequence[str], limit: int, *,
                 progress: bool = False) -> list[float | None]:
    """Each question asked of the forum, then again without the topic that answered it best:
    its best score then (None when nothing was found either time), in the order given."""
    out: list[float | None] = []
    for text in tqdm(texts, desc="members' questions", unit="question", disable=not progress):
        first = pipeline.assess(text, limit, Trace())
        _check(first)
        scored = [c for c in first.kept if c.score is not None]
        if not scored:
            out.append(None)
            continue
        best = max(scored, key=lambda c: c.score or 0.0).topic.topic_id
        again = pipeline.assess(text, limit, Trace(), frozenset({best}))
        _check(again)
        out.append(again.top)
    return out


def _check(assessed: Assessment) -> None:
    if assessed.rerank_error is not None:  # thresholds of one scorer only
        raise ValueError(f"the cross-encoder failed during calibration: "
                         f"{assessed.rerank_error}")


def member_questions(res: CalibrationResources, stored: Sequence[MemberQuestion],
                     wanted: int) -> list[MemberQuestion]:
    """Up to ``wanted`` of the stored questions, newest first, with at most a few per asker
    and near-duplicates once (cosine of the serving model's query vectors)."""
    capped = per_asker(stored)[:wanted * EMBED_PER_QUESTION]
    if not capped:
        return []
    vectors = np.asarray(res.search.embedder.embed([q.text for q in capped], kind="query"),
                         dtype=np.float64)
    vectors /= np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return [capped[i] for i in distinct(vectors)][:wanted]


def _members(res: CalibrationResources, stored: Sequence[MemberQuestion], wanted: int,
             basis: Basis) -> tuple[list[MemberQuestion], int]:
    """The members' questions the normal threshold is read from (none: the opening posts'),
    and how many askers they come from; ValueError when ``basis`` "asked" cannot be met."""
    members = member_questions(res, stored, wanted)
    count = askers(members)
    need = res.settings.calibration_min_askers
    if basis == "asked":
        if not members:
            raise ValueError("no stored question to read the normal threshold from: the "
                             "forum's members have not asked through /v1/retrieve yet")
        if count < need:
            raise ValueError(f"the members' questions come from {count} askers (retrievals "
                             f"without an asker id are one); at least {need} are needed "
                             "(SIDECAR_CALIBRATION_MIN_ASKERS)")
    elif len(members) < MIN_ASKED or count < need:
        return [], count
    return members, count


def never_read(settings: Settings) -> frozenset[int] | None:
    """The topics the in-process embedder never read while it was tuned on this forum (its
    manifest's held-out split); None for a model that read none of the forum's topics."""
    if settings.embed_url:  # a model host's model: not tuned here
        return None
    try:
        training = read_manifest(settings.embed_dir()).training
    except ModelLoadError:
        return None
    if not training or training.get("kind") != "embedder":
        return None
    return frozenset(int(t) for t in training.get("split", {}).get("held_topics", ()))


def calibrate_zones(res: CalibrationResources, *, questions: int = DEFAULT_QUESTIONS,
                    seed: int | None = None, abstain_pct: float = 10.0,
                    normal_pct: float = 80.0, basis: Basis = "auto",
                    progress: bool = True) -> CalibrationRun:
    """Ask the forum ``questions`` of its own opening posts, each without its topic, and set
    the zone thresholds of the scorer that answered them (ValueError when too few). With
    ``basis`` "asked" (or "auto" and at least :data:`MIN_ASKED` of them, from enough askers),
    the normal threshold is read from up to ``questions`` of the questions members asked
    instead. ``seed`` (random when None) draws the opening posts, among the topics a tuned
    embedder never read (:func:`never_read`). The run's ``problems`` say why it moves past its
    bound from the served calibration."""
    started = time.perf_counter()
    pipeline = res.retrieval()
    settings = res.settings
    limit = settings.retrieve_limit
    seed = secrets.randbits(31) if seed is None else seed  # not predictable from outside
    unread = never_read(settings)
    with res.db.connection() as conn:
        sample = opening_posts(conn, questions, seed, among=unread)
        stored = (asked_questions(conn, questions * READ_PER_QUESTION, WINDOW_DAYS)
                  if basis != "opening_posts" else [])
    if unread is not None and len(sample) < MIN_QUESTIONS:
        raise ValueError(f"{res.model.name} was tuned on this forum and never read only "
                         f"{len(sample)} of its topics with a reply; at least {MIN_QUESTIONS} "
                         "are needed to calibrate its zones (the topics it read score apart)")
    members, asker_count = _members(res, stored, questions, basis) if stored else ([], 0)
    if basis == "asked" and not stored:
        raise ValueError("no stored question to read the normal threshold from: the forum's "
                         "members have not asked through /v1/retrieve yet")
    asked = ([s for s in asked_scores(pipeline, [q.text for q in members], limit,
                                      progress=progress) if s is not None]
             if members else None)
    scores: list[float] = []
    keyword: list[float] = []
    scorer = ""
    unscored = 0
    for post in tqdm(sample, desc="calibrating zones", unit="question", disable=not progress):
        query = pseudo_question(post.title, post.text, res.settings.max_query_chars)
        assessed = pipeline.assess(query, limit, Trace(), frozenset({post.topic_id}))
        _check(assessed)
        scorer = assessed.scorer
        if assessed.top is None:
            unscored += 1
            continue
        scores.append(assessed.top)
        keyword.append(top_keyword(assessed.found.topics))
    created = datetime.now(UTC).isoformat(timespec="seconds")
    scorer = scorer or f"bi-encoder:{res.model.name}"
    served = profile_zones(settings).get(scorer)
    approved = served.approved_normal if served is not None else None
    calibration = calibrate(scores, scorer=scorer, created_at=created, abstain_pct=abstain_pct,
                            normal_pct=normal_pct, asked=asked, seed=seed,
                            approved_normal=approved)
    problems = move_problems(
        scores, abstain=calibration.abstain, normal=calibration.normal, normal_pct=normal_pct,
        served=(served.abstain, served.normal) if served is not None else None,
        approved_normal=approved,
        bounds=Bounds(settings.calibration_max_move, settings.calibration_max_from_own))
    kind = calibration.scorer.split(":", 1)[0]
    before = ({"abstain": settings.zone_ce_abstain, "normal": settings.zone_ce_normal}
              if kind == "cross-encoder" else
              {"abstain": settings.zone_cos_abstain, "normal": settings.zone_cos_normal})
    before["share_of_unanswered_normal"] = calibration.share_above(before["normal"])
    log.info("zones of %s: abstain below %.4f, normal from %.4f (%d questions, %d asked by %d "
             "askers, seed %d)", calibration.scorer, calibration.abstain, calibration.normal,
             len(scores), calibration.asked, asker_count, seed)
    for problem in problems:
        log.warning("zones of %s not applied without a person: %s", scorer, problem)
    return CalibrationRun(calibration=calibration, scores=scores, keyword=keyword,
                          unscored=unscored, seconds=time.perf_counter() - started,
                          before=before, askers=asker_count, problems=problems)


def ensure_zones(res: CalibrationResources, *, questions: int = DEFAULT_QUESTIONS) -> str:
    """Calibrate the served scorer's zones once (``sidecar run``'s preparation): nothing when
    the search profile already has them; returns what it did, in a sentence."""
    settings = res.settings
    scorer = (f"cross-encoder:{res.reranker.name}" if res.reranker is not None
              else f"bi-encoder:{res.model.name}")
    if scorer in profile_zones(settings):
        return f"zones of {scorer}: calibrated already"
    try:
        run = calibrate_zones(res, questions=questions, progress=False)
    except ValueError as exc:
        return f"zones of {scorer}: the settings' thresholds ({exc})"
    path = settings.profile_path()
    c = run.calibration
    if run.problems:
        update_profile(path, lambda: with_pending(path, c, run.problems, model=res.model.name,
                                                  strategy=settings.strategy,
                                                  settings=settings))
        return (f"zones of {scorer}: the settings' thresholds (the calibration moved past its "
                "bound and waits for `sidecar calibrate --approve`)")
    update_profile(path, lambda: with_zones(path, c, model=res.model.name,
                                            strategy=settings.strategy, settings=settings))
    return (f"zones of {c.scorer}: calibrated on {c.questions} of the forum's own questions "
            f"(abstain below {c.abstain:.3f}, normal from {c.normal:.3f})")
