"""``POST /v1/answer``: the retrieval, the LLM the zone allows, the sanitizer, the ask log.

retrieve (the pipeline of ``/v1/retrieve``, stored) → ``generate`` (the zone's prompt to the LLM,
streamed, under the answer's deadline; none when the zone abstains) → ``sanitize`` (the reply
checked against the evidence as it is now, by the same :meth:`SanitizeService.finish` as
``/v1/sanitize``) → logged (``sidecar_answers``).

How an ask ends (its ``outcome``):
- ``answered``: the sanitized reply, post-level links and Sources;
- ``abstained``: the zone abstained; no LLM call; the fixed abstain text;
- ``no_answer``: the LLM used the refusal clause; the abstain text, none of its words;
- ``failed``: the LLM failed or the deadline passed; the evidence as "posts that may answer";
- ``cancelled``: the member left a streamed answer; the LLM call is stopped.

Admission comes first (:meth:`AnswerService.admit`): the asker's rate and the node's cap on LLM
calls in flight, so a refusal (429) costs neither a retrieval nor an LLM call.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

from redis import Redis

from sidecar.answer.answer_types import AnswerOutcome, Ticket
from sidecar.answer.limits import AskerLimit, InflightSlots
from sidecar.answer.llm import AnswerLLM, LLMFailure
from sidecar.answer.llm_call import LLMCall
from sidecar.answer.pipeline import RetrievalPipeline
from sidecar.answer.pipeline_types import RetrievalOutcome
from sidecar.answer.sanitize_service import Finished, SanitizeService, removed_counts
from sidecar.config.settings import Settings
from sidecar.core.answer_messages import failure_reply
from sidecar.core.condense import Turn
from sidecar.core.sanitize import SanitizeResult
from sidecar.core.stream_sanitize import StreamSanitizer
from sidecar.core.trace import StepFailed
from sidecar.db import Database
from sidecar.db.answers import AnswerRow, insert_answer, mark_gap
from sidecar.errors import TooManyRequests

log = logging.getLogger(__name__)

Event = tuple[str, dict[str, Any]]  # an SSE event: its name and its JSON data


class AnswerService:
    """Built once per app; every method is safe to call from many threads."""

    def __init__(self, *, pipeline: RetrievalPipeline, sanitizer: SanitizeService, db: Database,
                 redis: Redis, settings: Settings, llm: AnswerLLM, model_name: str) -> None:
        """``model_name``: the embedding model whose query vectors the content gaps keep."""
        self.pipeline = pipeline
        self.sanitizer = sanitizer
        self.db = db
        self.settings = settings
        self.llm = llm
        self.model_name = model_name
        self.slots = InflightSlots(redis, settings.queue_prefix, settings.answer_max_inflight,
                                   ttl_s=settings.answer_timeout_s + 30)
        self.askers = AskerLimit(redis, settings.queue_prefix, settings.answer_asker_per_minute)

    # -- admission and retrieval (before any byte of the answer leaves) ------------------------
    def admit(self, asker: str | None) -> Ticket:
        """Count the ask and take an LLM slot; 429 (with Retry-After) when either is spent."""
        started = time.monotonic()
        wait = self.askers.wait_s(asker)
        if wait is not None:
            raise TooManyRequests(
                f"this asker asked more than {self.settings.answer_asker_per_minute} questions "
                "in a minute; ask again later", retry_after_s=wait)
        token = self.slots.take()
        if token is None:
            raise TooManyRequests(
                f"{self.settings.answer_max_inflight} answers are being written on this node; "
                "ask again in a few seconds", retry_after_s=2)
        return Ticket(started=started, deadline=started + self.settings.answer_timeout_s,
                      release_slot=lambda: self.slots.give_back(token))

    def retrieve(self, turns: Sequence[Turn], limit: int | None, locale: str | None,
                 asker: str | None) -> RetrievalOutcome:
        """The retrieval of ``/v1/retrieve`` (stored; its 4xx are the answer's)."""
        return self.pipeline.retrieve(turns, limit, locale, asker)

    # -- the answer -----------------------------------------------------------------------------
    def answer(self, ticket: Ticket, retrieval: RetrievalOutcome) -> AnswerOutcome:
        """The whole answer at once (``"stream": false``)."""
        outcome = None
        for name, data in self._generate(ticket, retrieval, stream=False):
            if name == "answer":
                outcome = data["outcome"]
        assert isinstance(outcome, AnswerOutcome)
        return outcome

    def events(self, ticket: Ticket, retrieval: RetrievalOutcome) -> Iterator[Event]:
        """The answer as Server-Sent Events: ``retrieval``, ``delta``s, then ``answer``.

        A member who leaves (the server closes this generator at a failed write) cancels the
        LLM call; the ask is logged ``cancelled``.
        """
        yield "retrieval", retrieval_event(retrieval)
        for name, data in self._generate(ticket, retrieval, stream=True):
            yield name, data["outcome"].as_dict() if name == "answer" else data

    def _generate(self, ticket: Ticket, r: RetrievalOutcome, *, stream: bool
                  ) -> Iterator[tuple[str, dict[str, Any]]]:
        out = AnswerOutcome(answer_id=uuid.uuid4(), retrieval=r, streamed=stream,
                            llm=self.llm.kind, model=self.llm.model)
        call: LLMCall | None = None
        logged = False
        try:
            if r.prompt is None:
                ticket.release()
                out.end("abstained", SanitizeResult(text=r.abstain_text or "", citations=[],
                                                    removed=[]))
                r.trace.skip("generate", f"zone {r.zone.value}: no LLM is asked")
                r.trace.skip("sanitize", "nothing from an LLM to check")
            else:
                call = LLMCall(self.llm, r.prompt.chat_messages(), ticket.deadline,
                               on_done=ticket.release_slot_once)
                ticket.handed = True
                yield from self._stream_reply(call, r, out, stream)
            out.total_ms = ticket.elapsed_ms()
            self._log(out)
            logged = True
            yield "answer", {"outcome": out}
        except GeneratorExit:  # the member left: stop the LLM, say so in the log
            if not logged:
                self._abandon(out, call, ticket, "cancelled", None)
            raise
        except Exception as exc:  # a bug: logged as a failure, then the API's 500
            if not logged:
                self._abandon(out, call, ticket, "failed", type(exc).__name__)
            raise
        finally:
            ticket.release()

    def _abandon(self, out: AnswerOutcome, call: LLMCall | None, ticket: Ticket, outcome: str,
                 failure: str | None) -> None:
        if call is not None:
            call.cancel()
        out.end(outcome, SanitizeResult(text="", citations=[], removed=[]),
                stage="internal" if failure else None, failure=failure)
        out.first_token_ms = call.first_token_ms if call is not None else None
        out.total_ms = ticket.elapsed_ms()
        self._log(out)

    def _stream_reply(self, call: LLMCall, r: RetrievalOutcome, out: AnswerOutcome,
                      stream: bool) -> Iterator[tuple[str, dict[str, Any]]]:
        """Read the reply (sending sanitized deltas when streaming), then finish it."""
        streamer = None
        if stream:  # the deltas are checked against the evidence as it is when the LLM starts
            with self.db.connection() as conn:
                early = self.sanitizer.check(conn, r.evidence, r.locale)
            streamer = StreamSanitizer(lambda text: early.sanitize(text, footer=False).text)
        failure: LLMFailure | None = None
        with r.trace.step("generate", swallow=True) as detail:
            detail.update(llm=self.llm.kind, model=self.llm.model, zone=r.zone.value)
            try:
                for piece in call.pieces():
                    if streamer is not None:
                        delta = streamer.feed(piece)
                        if delta:
                            yield "delta", {"text": delta}
            except LLMFailure as exc:
                failure = exc
                detail.update(error=exc.message, reason=exc.reason)
                raise StepFailed(exc.reason) from exc
            finally:
                detail.update(first_token_ms=call.first_token_ms, chars=len(call.text),
                              prompt_tokens=call.usage.prompt_tokens,
                              reply_tokens=call.usage.reply_tokens)
        out.first_token_ms = call.first_token_ms
        out.usage = call.usage
        with r.trace.step("sanitize") as detail:
            with self.db.connection() as conn:  # the posts as they are now, after the LLM
                checked = self.sanitizer.check(conn, r.evidence, r.locale)
            if failure is not None:
                titles = [(int(e["n"]), str(e.get("title") or "")) for e in r.evidence]
                result = checked.sanitize(failure_reply(checked.locale, titles))
                out.end("failed", result, stage="generate", failure=failure.reason)
            else:
                done: Finished = self.sanitizer.finish(checked, call.text)
                out.end(done.outcome, done.result)
            detail.update(outcome=out.outcome, cited=len(out.result.citations),
                          removed=removed_counts(out.result))

    def _log(self, out: AnswerOutcome) -> None:
        """Store the ask (a ``log`` step of the trace); an unanswered question keeps its query's
        vector for the gaps."""
        r = out.retrieval
        with r.trace.step("log") as detail:
            detail["stored"] = self._store(out)

    def _store(self, out: AnswerOutcome) -> bool:
        r = out.retrieval
        try:
            with self.db.connection() as conn:
                insert_answer(conn, AnswerRow(
                    id=out.answer_id, retrieval_id=r.retrieval_id, source="answer",
                    outcome=out.outcome, answer=out.result.text, failure_stage=out.failure_stage,
                    failure=out.failure, llm=out.llm, model=out.model, streamed=out.streamed,
                    cited_post_ids=[c.post_id for c in out.result.citations],
                    removed=removed_counts(out.result), first_token_ms=out.first_token_ms,
                    total_ms=out.total_ms, prompt_tokens=out.usage.prompt_tokens,
                    reply_tokens=out.usage.reply_tokens))
                if out.outcome == "no_answer" and r.vector is not None:
                    mark_gap(conn, r.retrieval_id, [float(x) for x in r.vector], self.model_name)
            return True
        except Exception:  # the member has the answer; a lost log line must not take it away
            log.exception("could not store ask %s of retrieval %s", out.answer_id,
                          r.retrieval_id)
            return False


def retrieval_event(r: RetrievalOutcome) -> dict[str, Any]:
    """The stream's first event: the zone and the evidence without its excerpts."""
    return {
        "retrieval_id": str(r.retrieval_id), "zone": r.zone.value, "zone_reason": r.zone_reason,
        "evidence": [{k: v for k, v in e.items() if k not in {"excerpt", "neighbours"}}
                     for e in r.evidence],
    }
