"""`POST /v1/similar`: while a member writes a topic, the public topics that may already
answer it, and nothing when nothing is close enough.

The title and body are searched as ``/v1/search`` searches a question with details (the
semantic leg reads both, the keyword leg the title), and a topic is shown only when its
bi-encoder relevance (the similarity of its public post most similar to the question, the score
the answer zones read) reaches a zone threshold: the forum's calibrated one (``sidecar
calibrate``, in the search profile) named by ``SIDECAR_SIMILAR_THRESHOLD`` (``abstain`` or
``normal``), else the settings' ``SIDECAR_ZONE_COS_NORMAL``. Below it the answer is an empty list:
silence, not a weak suggestion. Which threshold, and what it costs, was chosen by
``sidecar eval-related`` (docs/related.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sidecar.config.settings import Settings
from sidecar.core.text import cook, html_to_text
from sidecar.core.trace import Trace
from sidecar.db.embeddings import RegisteredModel
from sidecar.search.profile import ProfileState
from sidecar.search.service import SearchOptions, SearchOutcome, SearchService, TopicResult

MAX_LIMIT = 10  # the largest answer of /v1/similar
CANDIDATES = 10  # topics ranked before the threshold (a few more than shown)


class SimilarResources(Protocol):
    """What the service takes of the process's resources: the API builds it from its one
    ``Resources`` (``sidecar.runtime.resources``), which this layer never imports."""

    @property
    def settings(self) -> Settings:
        """The process's settings."""
        ...

    @property
    def model(self) -> RegisteredModel:
        """The serving embedding model, as registered."""
        ...

    @property
    def search(self) -> SearchService:
        """The search a draft is run through."""
        ...

    @property
    def profile(self) -> ProfileState:
        """The served search profile (its calibrated zones)."""
        ...


@dataclass
class SimilarOutcome:
    """The topics shown (possibly none) and why."""

    title: str
    results: list[TopicResult]
    threshold: float
    threshold_source: str
    best: float | None  # the best topic's similarity, whether or not it passed
    trace: Trace


class SimilarService:
    """Built once per API process from its resources; safe to call from many threads."""

    def __init__(self, res: SimilarResources) -> None:
        self.res = res
        self.search = res.search
        self.settings = res.settings

    @property
    def scorer(self) -> str:
        """The zone scorer whose thresholds apply: the serving bi-encoder."""
        return f"bi-encoder:{self.res.model.name}"

    def threshold(self, which: str | None = None) -> tuple[float, str]:
        """The similarity a topic needs, and where it comes from: the calibrated zone
        threshold ``which`` (abstain or normal; default the setting), else, on a forum not
        calibrated, ``SIDECAR_ZONE_COS_NORMAL`` whichever is named: the fixed abstain
        threshold (0.35) stayed silent on 17% of another forum's questions only, the fixed
        normal one on 99% (docs/related.md)."""
        which = which or self.settings.similar_threshold
        calibrated = self.res.profile.zones_for(self.scorer)
        if calibrated is not None:
            value = calibrated.abstain if which == "abstain" else calibrated.normal
            return value, f"{which} zone threshold, {calibrated.source()}"
        return (self.settings.zone_cos_normal,
                "SIDECAR_ZONE_COS_NORMAL (zones not calibrated: `sidecar calibrate`)")

    def body_text(self, raw: str | None) -> str | None:
        """The body as the stored posts were embedded (Markdown rendered, then plain text),
        cut to ``SIDECAR_MAX_DETAILS_CHARS``; None when empty."""
        if not raw or not raw.strip():
            return None
        # Cut before rendering: rendering only takes markup away, so no text past the cut could
        # be kept, and a long draft (a 55 KB pipe table) cost a second and a half of CPU.
        raw = raw[: self.settings.max_details_chars]
        text = " ".join(html_to_text(cook(raw)).split())
        return text[: self.settings.max_details_chars] or None

    def rank(self, title: str, raw: str | None, n: int, trace: Trace | None = None, *,
             exclude: frozenset[int] = frozenset()) -> SearchOutcome:
        """The ``n`` best topics for a topic being written, linked, with their similarity."""
        return self.search.find_topics(title, n, SearchOptions(exclude_topics=exclude), trace,
                                       details=self.body_text(raw))

    def similar(self, title: str, raw: str | None, limit: int, *,
                exclude: frozenset[int] = frozenset(),
                threshold: tuple[float, str] | None = None) -> SimilarOutcome:
        """Topics whose similarity reaches the threshold, best first (at most ``limit``)."""
        trace = Trace()
        title = self.search.check_query(title)
        found = self.rank(title, raw, max(limit, CANDIDATES), trace, exclude=exclude)
        value, source = threshold or self.threshold()
        with trace.step("threshold") as detail:
            sims = [t.similarity for t in found.topics if t.similarity is not None]
            best = max(sims) if sims else None
            # In the search's order (fused), which measures better than by similarity alone.
            close = [t for t in found.topics
                     if t.similarity is not None and t.similarity >= value]
            detail.update(threshold=value, source=source, scorer=self.scorer,
                          best=None if best is None else round(best, 6),
                          candidates=len(found.topics), passed=len(close))
        results = self.search.hydrate(title, close, limit, trace) if close else []
        if not close:
            trace.skip("hydrate", "nothing close enough: silent")
        return SimilarOutcome(title=title, results=results, threshold=value,
                              threshold_source=source, best=best, trace=trace)

