"""What the moderator pages and the JSON API call: list, detail, label, calibration."""

from __future__ import annotations

import math
import uuid
from dataclasses import dataclass
from typing import Any

from sidecar.config.settings import Settings
from sidecar.core.answerability import ZoneCalibration
from sidecar.core.calibration import LabelledScore, ScorerReport, calibrate_scorer, scorer_kind
from sidecar.core.zones import ScorerKind, Thresholds
from sidecar.db import Database
from sidecar.db import moderation as repo
from sidecar.db.answers import answers_of, outcome_counts
from sidecar.db.moderation import ReviewCounts, ReviewItem
from sidecar.db.pool import DictConn
from sidecar.db.public import public_post_ids
from sidecar.errors import InvalidInput, NotFound
from sidecar.moderation.asks import cited_post_ids, shown_asks
from sidecar.moderation.chart import zone_chart_svg
from sidecar.moderation.gaps import content_gaps
from sidecar.moderation.models import GapQuery, LabelRequest, ReviewFilters
from sidecar.search.profile import profile_pending, profile_zones


def parse_id(value: str) -> uuid.UUID:
    """A retrieval id from a URL; anything that is not a UUID is simply not found."""
    try:
        return uuid.UUID(value)
    except ValueError:
        raise NotFound(f"no retrieval {value!r}") from None


def _label_of(row: ReviewItem) -> dict[str, Any] | None:
    if row.label is None or row.labelled_at is None:
        return None
    return {"label": row.label, "right_topic_id": row.right_topic_id, "note": row.note,
            "moderator": row.moderator, "labelled_at": row.labelled_at.isoformat()}


def item_json(row: ReviewItem, answers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """One row of the review list, as the JSON API returns it (``answers``: its asks, shown
    by :func:`sidecar.moderation.asks.shown_asks`)."""
    return {
        "id": str(row.id), "created_at": row.created_at.isoformat(),
        "zone": row.zone.value, "zone_reason": row.zone_reason, "query": row.query,
        "query_source": row.query_source, "gate_reason": row.gate_reason, "scorer": row.scorer,
        "top_score": row.top_score, "locale": row.locale,
        "evidence_count": row.evidence_count, "top_title": row.top_title,
        "label": _label_of(row), "answers": answers or [],
    }


def _post_id(entry: object) -> int | None:
    value = entry.get("post_id") if isinstance(entry, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def evidence_post_ids(evidence: list[Any]) -> list[int]:
    """The posts stored evidence shows: each entry's and its neighbours'."""
    ids = {_post_id(e) for e in evidence}
    ids |= {_post_id(nb) for e in evidence if isinstance(e, dict)
            for nb in (e.get("neighbours") or []) if isinstance(e.get("neighbours"), list)}
    return sorted(i for i in ids if i is not None)


def shown_evidence(evidence: list[Any], public: set[int]) -> list[dict[str, Any]]:
    """Stored evidence as it may be shown now: a post that is no longer public keeps only its
    number and score (``withheld``), a neighbour that is no longer public is left out."""
    shown = []
    for entry in evidence:
        if not isinstance(entry, dict):
            continue
        if _post_id(entry) not in public:
            shown.append({"n": entry.get("n"), "score": entry.get("score"), "withheld": True})
            continue
        neighbours = entry.get("neighbours")
        if isinstance(neighbours, list):
            entry = {**entry, "neighbours": [nb for nb in neighbours if _post_id(nb) in public]}
        shown.append(entry)
    return shown


def _shown_answers(conn: DictConn, ids: list[uuid.UUID], evidence: dict[uuid.UUID, Any]
                   ) -> dict[uuid.UUID, list[dict[str, Any]]]:
    """The asks of some retrievals as shown now: their cited and evidence posts re-checked."""
    asks = answers_of(conn, ids)
    if not asks:
        return {}
    stored = {rid: e if isinstance(e, list) else [] for rid, e in evidence.items()}
    posts = {pid for e in stored.values() for pid in evidence_post_ids(e)}
    posts |= {pid for rows in asks.values() for pid in cited_post_ids(rows)}
    public = set(public_post_ids(conn, sorted(posts)))
    return {rid: shown_asks(rows, stored.get(rid, []), public) for rid, rows in asks.items()}


@dataclass
class ReviewPage:
    """One page of the review list."""

    items: list[ReviewItem]
    total: int
    filters: ReviewFilters
    answers: dict[uuid.UUID, list[dict[str, Any]]]  # each item's asks, oldest first

    @property
    def pages(self) -> int:
        """Number of pages (at least 1)."""
        return max(1, math.ceil(self.total / self.filters.per_page))


class ModerationService:
    """The review queue and the calibration report over the stored retrievals."""

    def __init__(self, db: Database, settings: Settings, gap_model: str) -> None:
        """``gap_model``: the served embedding model (the content gaps group its vectors)."""
        self.db = db
        self.settings = settings
        self.gap_model = gap_model
        # The forum's calibrated zones, read once like the API nodes read the profile.
        self.zones = profile_zones(settings)

    def pending(self) -> dict[str, tuple[ZoneCalibration, list[str]]]:
        """Calibrations that moved past their bound and wait for a person, by scorer, with
        why (read anew: ``sidecar calibrate`` writes them while the API runs)."""
        return profile_pending(self.settings)

    def thresholds(self, kind: ScorerKind, scorer: str | None = None) -> Thresholds:
        """The zone thresholds a scorer is judged by: the forum's calibration, else the
        settings' thresholds of its kind."""
        calibrated = self.zones.get(scorer or "")
        if calibrated is not None:
            return Thresholds(abstain=calibrated.abstain, normal=calibrated.normal)
        s = self.settings
        if kind is ScorerKind.CROSS_ENCODER:
            return Thresholds(abstain=s.zone_ce_abstain, normal=s.zone_ce_normal)
        return Thresholds(abstain=s.zone_cos_abstain, normal=s.zone_cos_normal)

    def review(self, filters: ReviewFilters) -> ReviewPage:
        """Abstain and cautious retrievals (every zone with an outcome filter) matching the
        filters, newest first, with their asks."""
        with self.db.connection() as conn:
            items, total = repo.list_review(conn, filters)
            ids = [r.id for r in items]
            answers = _shown_answers(conn, ids, repo.evidence_of(conn, ids))
        return ReviewPage(items, total, filters, answers)

    def overview(self) -> tuple[ReviewCounts, list[str], dict[str, int]]:
        """Counts for the list's header, the scorers for its filter, asks by outcome."""
        with self.db.connection() as conn:
            return repo.review_counts(conn), repo.review_scorers(conn), outcome_counts(conn)

    def gaps(self, query: GapQuery) -> dict[str, Any]:
        """The content gaps of the last ``query.days`` days."""
        return content_gaps(self.db, self.settings, self.gap_model, query)

    def detail(self, retrieval_id: uuid.UUID) -> dict[str, Any]:
        """One retrieval, with the titles of its candidate topics that are public now."""
        with self.db.connection() as conn:
            row = repo.get_review(conn, retrieval_id)
            if row is None:
                raise NotFound(f"no retrieval {retrieval_id}")
            candidates = row.candidates if isinstance(row.candidates, list) else []
            ids = sorted({int(c["topic_id"]) for c in candidates
                          if isinstance(c, dict) and str(c.get("topic_id", "")).isdigit()})
            titles = repo.public_topic_titles(conn, ids)
            evidence = row.evidence if isinstance(row.evidence, list) else []
            # Re-checked at display: a post may have become private since it was evidence.
            public = set(public_post_ids(conn, evidence_post_ids(evidence)))
            answers = _shown_answers(conn, [row.id], {row.id: evidence})
        data = item_json(row, answers.get(row.id))
        data.update(
            conversation=row.conversation, scores=row.scores,
            evidence=shown_evidence(evidence, public),
            trace=row.trace,
            candidates=[
                {**c, "title": titles.get(int(c["topic_id"]))
                 if str(c.get("topic_id", "")).isdigit() else None}
                for c in candidates if isinstance(c, dict)
            ],
        )
        return data

    def label(self, retrieval_id: uuid.UUID, request: LabelRequest) -> dict[str, Any]:
        """Store a label; the right topic must be a public topic now."""
        with self.db.connection() as conn:
            if not repo.retrieval_exists(conn, retrieval_id):
                raise NotFound(f"no retrieval {retrieval_id}")
            if request.right_topic_id is not None and not repo.public_topic_titles(
                    conn, [request.right_topic_id]):
                raise InvalidInput(
                    f"topic {request.right_topic_id} is not a public topic of the forum",
                    details=[{"loc": "right_topic_id", "msg": "not a public topic"}])
            stored = repo.upsert_label(conn, retrieval_id, label=request.label,
                                       right_topic_id=request.right_topic_id,
                                       note=request.note, moderator=request.moderator)
        return {"retrieval_id": str(retrieval_id), "label": stored.label,
                "right_topic_id": stored.right_topic_id, "note": stored.note,
                "moderator": stored.moderator, "labelled_at": stored.labelled_at.isoformat()}

    def calibration(self) -> list[ScorerReport]:
        """One report per labelled cross-encoder or bi-encoder scorer."""
        return [report for report, _ in self.calibration_charts()]

    def calibration_charts(self) -> list[tuple[ScorerReport, str]]:
        """Each labelled or calibrated scorer's report with its zone chart (inline SVG)."""
        with self.db.connection() as conn:
            labelled = repo.labelled_scores(conn)
            scorers = sorted({r.scorer for r in labelled if scorer_kind(r.scorer)}
                             | {s for s in self.zones if scorer_kind(s)})
            scores = repo.stored_scores(conn, scorers)
        reports = []
        for scorer in scorers:
            kind = scorer_kind(scorer)
            assert kind is not None
            points = [
                LabelledScore(
                    score=r.top_score, label=r.label,
                    right_at_top=(r.right_topic_id is not None
                                  and r.right_topic_id == r.top_topic_id),
                )
                for r in labelled if r.scorer == scorer
            ]
            limits = self.thresholds(kind, scorer)
            report = calibrate_scorer(scorer, kind, limits, points, scores.get(scorer, []))
            reports.append((report, zone_chart_svg(self.zones.get(scorer), points, limits)))
        return reports
