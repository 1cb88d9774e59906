"""The retrieval pipeline behind ``POST /v1/retrieve``.

gate → condense → hybrid search wide (embed, semantic, keyword, fuse, aggregate) → rerank →
zone → evidence → stored. Every stage reports itself in the trace; the stages that depend on a
model outside the database (the LLM, the cross-encoder) degrade instead of failing, and say so.
"""

from __future__ import annotations

import dataclasses
import logging
import time
import uuid
from collections.abc import Sequence
from typing import Any

from sidecar.answer.condense import Condensed, Condenser
from sidecar.answer.llm import ChatLLM
from sidecar.answer.ollama import OllamaChat
from sidecar.answer.pipeline_types import Assessment, PipelineResources, RetrievalOutcome
from sidecar.answer.rerank import POSTS_PER_TOPIC, Candidate, by_relevance, cross_encode
from sidecar.config.settings import Settings
from sidecar.core.answer_messages import abstain_text
from sidecar.core.answer_prompt import PromptEvidence, build_prompt
from sidecar.core.condense import Turn
from sidecar.core.evidence import PostText, evidence_item, plain_text
from sidecar.core.gate import GateDecision, check_input
from sidecar.core.knee import knee_cut
from sidecar.core.sanitize_messages import pick_locale
from sidecar.core.text import excerpt
from sidecar.core.trace import StepFailed, Trace
from sidecar.core.types import TopicHit
from sidecar.core.zones import ScorerKind, Thresholds, Zone, ZoneDecision, decide_zone
from sidecar.db.evidence_read import neighbour_posts
from sidecar.db.forum_read import PostRecord, public_posts
from sidecar.db.retrievals import RetrievalRow, insert_retrieval
from sidecar.errors import ConfigurationError
from sidecar.search.service import SearchOptions

log = logging.getLogger(__name__)

# Stages that a gated request never reaches, in pipeline order.
_SEARCH_STAGES = ("condense", "embed", "semantic", "keyword", "fuse", "aggregate", "link",
                  "rerank")


def thresholds(settings: Settings, kind: ScorerKind) -> Thresholds:
    """The configured zone thresholds of a scorer (a wrong order is a configuration error)."""
    try:
        if kind is ScorerKind.CROSS_ENCODER:
            return Thresholds(settings.zone_ce_abstain, settings.zone_ce_normal)
        return Thresholds(settings.zone_cos_abstain, settings.zone_cos_normal)
    except ValueError as exc:
        raise ConfigurationError(f"zone thresholds for the {kind.value}: {exc}") from exc


def llm_from_settings(settings: Settings) -> ChatLLM | None:
    """The configured Ollama model, or None when ``OLLAMA_URL`` is not set."""
    if not settings.ollama_url:
        return None
    return OllamaChat(settings.ollama_url, settings.ollama_model,
                      timeout_s=settings.ollama_timeout_s, keep_alive=settings.ollama_keep_alive)


def post_text(res: PipelineResources, record: PostRecord) -> PostText:
    """A public post as the rerank and the evidence read it (plain text, post-level URL)."""
    return PostText(post_id=record.post_id, topic_id=record.topic_id,
                    post_number=record.post_number, title=record.title,
                    url=res.search.url(record), text=plain_text(record.cooked))


def load_candidates(res: PipelineResources, topics: Sequence[TopicHit]) -> list[Candidate]:
    """Topics with the texts of their first public posts in the chooser's order (the linked
    post first; a post hidden since the search is gone)."""
    wanted = [pid for t in topics for pid in t.link_order()[:POSTS_PER_TOPIC + 1]]
    with res.db.connection() as conn:
        records = public_posts(conn, wanted)
    candidates = []
    for rank, topic in enumerate(topics, start=1):
        public = [pid for pid in topic.link_order()[:POSTS_PER_TOPIC + 1] if pid in records]
        posts = [post_text(res, records[pid]) for pid in public[:POSTS_PER_TOPIC]]
        if posts:
            candidates.append(Candidate(topic=topic, fused_rank=rank, posts=posts))
    return candidates


class RetrievalPipeline:
    """Built once per app from its resources; ``retrieve`` is safe to call from many threads."""

    def __init__(self, res: PipelineResources, llm: ChatLLM | None = None) -> None:
        self.res = res
        self.settings = res.settings
        for kind in ScorerKind:  # refuse bad thresholds at start-up, not on the first request
            thresholds(self.settings, kind)
        self.llm = llm if llm is not None else llm_from_settings(self.settings)
        self.condenser = Condenser(
            res.redis, self.llm,
            max_turns=self.settings.condense_max_turns,
            cache_ttl_s=self.settings.condense_cache_ttl_s,
            daily_budget=self.settings.condense_daily_budget,
            max_query_chars=self.settings.max_query_chars,
            namespace=self.settings.queue_prefix,
        )

    def retrieve(
        self, turns: Sequence[Turn], limit: int | None = None, locale: str | None = None,
        asker: str | None = None,
    ) -> RetrievalOutcome:
        """Run the pipeline for a conversation whose last turn is the member's; store the row
        (with ``asker``, the forum's opaque id of who asked, which the calibration counts)."""
        limit = limit or self.settings.retrieve_limit
        trace = Trace()
        with trace.step("gate") as detail:
            gate = check_input(turns[-1].content, min_chars=self.settings.gate_min_chars,
                               max_chars=self.settings.max_query_chars)
            detail.update(passed=gate.passed, reason=gate.reason.value if gate.reason else None,
                          rule=gate.rule)
        if not gate.passed:
            outcome = self._gated(gate, trace)
        else:
            outcome = self._search(turns, limit, gate, trace, locale)
        outcome.locale = pick_locale(locale, self.settings.forum_locale)
        if outcome.prompt is None:
            outcome.abstain_text = abstain_text(outcome.locale, self.settings.forum_url)
        self._store(outcome, turns, locale, asker)
        return outcome

    # --- stages -------------------------------------------------------------------------

    def _gated(self, gate: GateDecision, trace: Trace) -> RetrievalOutcome:
        why = f"input gate: {gate.reason.value if gate.reason else 'refused'}"
        for name in _SEARCH_STAGES:
            trace.skip(name, why)
        with trace.step("zone") as detail:
            decision = ZoneDecision(Zone.ABSTAIN, f"{why} ({gate.rule})")
            detail.update(zone=decision.zone.value, reason=decision.reason, scorer="none")
        trace.skip("evidence", why)
        return RetrievalOutcome(
            retrieval_id=uuid.uuid4(), query="", query_source="gate", zone=decision.zone,
            zone_reason=decision.reason, gate=gate, scorer="none", top_score=None, evidence=[],
            candidates=[], trace=trace,
        )

    def _condense(self, turns: Sequence[Turn], trace: Trace) -> Condensed:
        with trace.step("condense", swallow=True) as detail:
            condensed = self.condenser.condense(turns)
            detail.update(source=condensed.source, **condensed.detail)
            if condensed.reason:
                detail["reason"] = condensed.reason
            if condensed.cache:
                detail["cache"] = condensed.cache
            if condensed.source == "single_turn":
                detail.update(skipped=True, reason="single turn: the message is the query")
            if condensed.failed:
                # The LLM was asked and failed: an error step, then the fallback query goes on.
                detail.setdefault("error", condensed.reason)
                raise StepFailed(condensed.reason or "LLM failure")
        return condensed

    def zone_limits(self, kind: ScorerKind, scorer: str) -> tuple[Thresholds, str]:
        """The thresholds a scorer is judged by, and where they come from: the forum's own
        calibration (`sidecar calibrate`, in the search profile), else the settings."""
        calibrated = self.res.profile.zones_for(scorer)
        if calibrated is not None:
            return Thresholds(calibrated.abstain, calibrated.normal), calibrated.source()
        return thresholds(self.settings, kind), "the settings' thresholds (not calibrated)"

    def assess(self, query: str, limit: int, trace: Trace,
               exclude: frozenset[int] = frozenset()) -> Assessment:
        """Search wide, rerank and decide the zone of one standalone query (nothing stored):
        what ``/v1/retrieve`` does before the evidence, and what the zone calibration and its
        evaluation ask of the forum (with ``exclude``: topics hidden from both legs)."""
        wide = max(3 * limit, self.settings.rerank_candidates_min)
        options = SearchOptions(exclude_topics=exclude)
        found = self.res.search.find_topics(query, wide, options, trace)
        candidates = load_candidates(self.res, found.topics)
        candidates, kind, rerank_error = self._rerank(query, candidates, limit, trace)
        reranker = self.res.reranker
        with trace.step("zone") as detail:
            if kind is ScorerKind.BI_ENCODER:
                # A topic's relevance: its public post most similar to the question (the
                # chooser read them all); its evidence stays the linked post.
                for c in candidates:
                    c.scores = [c.topic.similarity]
            kept = candidates[:limit]
            scores = [c.score for c in kept if c.score is not None]
            top = max(scores) if scores else None
            scorer = (f"cross-encoder:{reranker.name}" if kind is ScorerKind.CROSS_ENCODER
                      and reranker is not None else f"bi-encoder:{self.res.model.name}")
            limits, source = self.zone_limits(kind, scorer)
            decision = decide_zone(kind, top, limits)
            reason = f"{decision.reason} ({source})" if top is not None else decision.reason
            if rerank_error is not None:
                reason = f"cross-encoder unavailable, zone from the bi-encoder: {reason}"
            detail.update(zone=decision.zone.value, reason=reason, scorer=scorer,
                          top_score=None if top is None else round(top, 6),
                          abstain_below=limits.abstain, normal_from=limits.normal,
                          thresholds=source)
        return Assessment(found=found, candidates=candidates, kept=kept, kind=kind,
                          scorer=scorer, top=top, zone=decision.zone, reason=reason,
                          rerank_error=rerank_error, options=options)

    def _search(
        self, turns: Sequence[Turn], limit: int, gate: GateDecision, trace: Trace,
        locale: str | None,
    ) -> RetrievalOutcome:
        condensed = self._condense(turns, trace)
        query = self.res.search.check_query(condensed.query)
        assessed = self.assess(query, limit, trace)
        candidates, kept, top = assessed.candidates, assessed.kept, assessed.top
        decision = ZoneDecision(assessed.zone, assessed.reason)
        reason, scorer, rerank_error = assessed.reason, assessed.scorer, assessed.rerank_error
        options = assessed.options

        flags = self.res.search.chain_flags(options)
        if flags.knee:  # with the knee off there is no knee step at all
            with trace.step("knee") as detail:
                cut = knee_cut([c.score for c in candidates], limit=limit,
                               min_items=flags.knee_min_items,
                               sensitivity=flags.knee_sensitivity)
                kept = kept[:cut.kept]
                detail.update(cut.as_dict())

        with trace.step("evidence") as detail:
            evidence = self._evidence(kept, query)
            # What an LLM is asked, shaped by the zone (none when it abstains): each evidence
            # post's words most about the question, longer than the excerpt a person reads.
            # Its own time is in the step's detail (`sidecar bench --part answer` reads it).
            started = time.perf_counter()
            prompt = build_prompt(
                decision.zone, turns[-1].content,
                [PromptEvidence(n, c.best_post.title, excerpt(
                    c.best_post.text, query, self.settings.answer_evidence_chars))
                 for n, c in enumerate(kept, start=1)],
                locale, standalone=query)
            detail.update(items=len(evidence), chars=self.settings.evidence_chars,
                          neighbours=self.settings.evidence_neighbours,
                          prompt_ms=round((time.perf_counter() - started) * 1000, 3))

        return RetrievalOutcome(
            retrieval_id=uuid.uuid4(), query=query, query_source=condensed.source,
            zone=decision.zone, zone_reason=reason, gate=gate, scorer=scorer,
            top_score=None if top is None else round(top, 6), evidence=evidence,
            candidates=[
                {"topic_id": c.topic.topic_id, "post_id": c.best_post.post_id,
                 "score": None if c.score is None else round(c.score, 6),
                 "fused_rank": c.fused_rank}
                for c in candidates
            ],
            trace=trace, condensed=condensed, rerank_error=rerank_error, prompt=prompt,
            vector=assessed.found.vector,
        )

    def _rerank(
        self, query: str, candidates: list[Candidate], limit: int, trace: Trace
    ) -> tuple[list[Candidate], ScorerKind, str | None]:
        """Cross-encoder order, or fused order when there is none or it fails (never raises)."""
        reranker = self.res.reranker
        rerank_error: str | None = None
        kind = ScorerKind.BI_ENCODER
        with trace.step("rerank", swallow=True) as detail:
            detail.update(candidates=len(candidates), kept=min(limit, len(candidates)))
            if not candidates:
                detail.update(skipped=True, reason="no candidates")
                if reranker is not None:
                    kind = ScorerKind.CROSS_ENCODER
            elif reranker is None and self.res.reranker_error:
                rerank_error = f"cross-encoder failed to load: {self.res.reranker_error}"
                detail.update(method="fused order", error=rerank_error, fallback="fused order")
                raise StepFailed(rerank_error)
            elif reranker is None:
                detail.update(skipped=True, method="fused order",
                              reason="no cross-encoder configured: bi-encoder cosine is the "
                                     "relevance score")
            else:
                detail.update(method="cross-encoder", model=reranker.name,
                              provider=reranker.provider)
                try:
                    residual = self.res.reranker_residual
                    detail["pairs"] = cross_encode(reranker, query, candidates, residual)
                    if residual is not None:
                        detail["residual"] = {"of": f"bi-encoder:{residual.model}",
                                              "cosine_weight": round(residual.cosine_weight, 4),
                                              "bias": round(residual.bias, 4)}
                except Exception as exc:
                    for c in candidates:
                        c.scores = []
                    rerank_error = f"{type(exc).__name__}: {exc}"[:500]
                    detail.update(error=rerank_error, fallback="fused order")
                    raise StepFailed(rerank_error) from exc
                kind = ScorerKind.CROSS_ENCODER
                candidates = by_relevance(candidates)
        return candidates, kind, rerank_error

    # --- helpers ------------------------------------------------------------------------

    def _evidence(self, kept: Sequence[Candidate], query: str) -> list[dict[str, Any]]:
        n_neighbours = self.settings.evidence_neighbours
        neighbours: dict[tuple[int, int], list[PostRecord]] = {}
        if n_neighbours > 0 and kept:
            with self.res.db.connection() as conn:
                neighbours = neighbour_posts(
                    conn, [(c.best_post.topic_id, c.best_post.post_number) for c in kept],
                    n_neighbours)
        items = []
        for n, c in enumerate(kept, start=1):
            best = c.best_post
            around = [post_text(self.res, r)
                      for r in neighbours.get((best.topic_id, best.post_number), [])]
            items.append(evidence_item(n, best, c.score, query, self.settings.evidence_chars,
                                       around))
        return items

    def _store(self, outcome: RetrievalOutcome, turns: Sequence[Turn], locale: str | None,
               asker: str | None) -> None:
        row = RetrievalRow(
            id=outcome.retrieval_id,
            conversation=[{"role": t.role, "content": t.content} for t in turns],
            query=outcome.query, query_source=outcome.query_source, locale=locale,
            zone=outcome.zone.value,
            gate_reason=outcome.gate.reason.value if outcome.gate.reason else None,
            scorer=outcome.scorer, top_score=outcome.top_score,
            scores=[e["score"] for e in outcome.evidence],
            evidence=outcome.evidence, candidates=outcome.candidates,
            trace=outcome.trace.as_list(), asker=asker,
        )
        if outcome.zone is Zone.ABSTAIN and outcome.vector is not None:
            # A question the forum cannot answer: its embedding for the content-gap view.
            row = dataclasses.replace(row, gap_vector=[float(x) for x in outcome.vector],
                                      gap_model=self.res.model.name)
        with self.res.db.connection() as conn:
            insert_retrieval(conn, row)
