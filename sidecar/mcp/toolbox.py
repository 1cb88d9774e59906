"""The MCP tools run on the sidecar's services, and every way they can fail as a tool result.

A tool calls what the matching /v1 route calls (``SearchService.search``,
``RelatedService.related``, ``RetrievalPipeline.retrieve``, ``AnswerService``: ``answer`` is
served only where an LLM is configured to write answers), so it sees only what they see:
public posts. What goes wrong inside a tool (arguments the model refuses, a topic that is not
public, a model host that is down, a bug) is a ``CallToolResult`` with ``isError`` and one short
sentence for the LLM, as the MCP specification asks, never an HTTP error: the agent reads it and
may try again. Only an unknown tool name is a protocol error (``UnknownTool``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import mcp_types as types
from pydantic import ValidationError

from models.errors import ModelError, ModelInputError
from sidecar.answer.answer_service import AnswerService
from sidecar.answer.pipeline import RetrievalPipeline
from sidecar.answer.pipeline_types import RetrievalOutcome
from sidecar.config.settings import Settings
from sidecar.core.trace import Trace
from sidecar.errors import SidecarError
from sidecar.mcp import render
from sidecar.mcp.tools import (
    ANSWER,
    RELATED,
    RETRIEVE,
    SEARCH,
    AnswerArguments,
    RelatedArguments,
    RetrieveArguments,
    SearchArguments,
    ToolArguments,
    ToolSpec,
)
from sidecar.related.service import RelatedService
from sidecar.search.service import SearchOptions, SearchService

log = logging.getLogger(__name__)

# A call's outcome, as the metrics count it: ok; invalid (arguments the tool refuses); refused
# (a 4xx of the service: a topic that is not public, a query too long); unavailable (a model or
# the database down: a 5xx); error (a bug: logged with its traceback).
OUTCOMES = ("ok", "invalid", "refused", "unavailable", "error")


class McpResources(Protocol):
    """What the tools take of the process's resources (``sidecar.runtime.resources.Resources``
    is one; the API hands it in)."""

    @property
    def settings(self) -> Settings:
        """The process's settings (the forum's address)."""
        ...

    @property
    def search(self) -> SearchService:
        """The search ``search`` runs."""
        ...

    def retrieval(self) -> RetrievalPipeline:
        """The pipeline ``retrieve`` runs."""
        ...

    @property
    def llm_configured(self) -> bool:
        """Whether an LLM is configured to write answers (``answer`` is served)."""
        ...

    def answerer(self) -> AnswerService:
        """The service ``answer`` runs (``/v1/answer``'s)."""
        ...


class UnknownTool(LookupError):
    """``tools/call`` named no tool of this server (a JSON-RPC "invalid params" error)."""


@dataclass
class Produced:
    """What a tool produced: the text the LLM reads, the same as JSON, and what the metrics
    observe."""

    text: str
    data: dict[str, Any]
    traces: list[Trace] = field(default_factory=list)
    retrieval: RetrievalOutcome | None = None
    answer: dict[str, Any] | None = None  # /v1/answer's body, for its metrics


@dataclass
class ToolCall:
    """One finished call: its result and what the metrics count."""

    tool: str
    outcome: str
    result: types.CallToolResult
    traces: list[Trace] = field(default_factory=list)
    retrieval: RetrievalOutcome | None = None
    answer: dict[str, Any] | None = None


class ToolBox:
    """The tools of this process, built once by the API; safe to call from many threads."""

    def __init__(self, res: McpResources, related: RelatedService) -> None:
        self.res = res
        self.related_service = related
        self._tools: dict[str, tuple[ToolSpec, Callable[[Any], Produced]]] = {}
        if res.llm_configured:  # as /v1/answer, which is a 503 without one
            self._tools[ANSWER.name] = (ANSWER, self.answer)
        self._tools.update({
            SEARCH.name: (SEARCH, self.search),
            RETRIEVE.name: (RETRIEVE, self.retrieve),
            RELATED.name: (RELATED, self.related),
        })

    def definitions(self) -> list[types.Tool]:
        """The tools as ``tools/list`` lists them."""
        forum = self.res.settings.forum_url
        return [spec.definition(forum) for spec, _ in self._tools.values()]

    def call(self, name: str, arguments: dict[str, Any] | None, *,
             structured: bool = True) -> ToolCall:
        """Run tool ``name``; ``structured``: add ``structuredContent`` (protocol 2025-06-18
        and later). Raises UnknownTool for a name this server does not have."""
        if name not in self._tools:
            raise UnknownTool(f"unknown tool: {name!r}; the tools are "
                              f"{', '.join(sorted(self._tools))}")
        spec, run = self._tools[name]
        try:
            args: ToolArguments = spec.arguments.model_validate(arguments or {})
        except ValidationError as exc:
            return _failed(name, "invalid", f"invalid arguments: {_problems(exc)}")
        try:
            produced = run(args)
        except ModelInputError as exc:
            return _failed(name, "invalid", str(exc))
        except SidecarError as exc:
            if exc.status >= 500:
                log.warning("MCP tool %s unavailable: %s: %s", name, exc.code, exc)
                return _failed(name, "unavailable", f"{exc.message}; try again later")
            return _failed(name, "refused", exc.message)
        except ModelError as exc:
            log.warning("MCP tool %s: model failure: %s", name, exc)
            return _failed(name, "unavailable", "the model is unavailable right now; try again "
                                                "later")
        except Exception:
            log.exception("MCP tool %s failed", name)
            return _failed(name, "error", "the tool failed; the sidecar's log has the detail")
        result = types.CallToolResult(
            content=[types.TextContent(type="text", text=produced.text)],
            structured_content=produced.data if structured else None)
        return ToolCall(name, "ok", result, produced.traces, produced.retrieval,
                        produced.answer)

    # --- the tools ------------------------------------------------------------------------

    def search(self, args: SearchArguments) -> Produced:
        """``search``: ``POST /v1/search`` with the served options."""
        search = self.res.search
        query = search.check_query(args.query)
        results, trace = search.search(query, args.limit, SearchOptions())
        hits = [render.topic_hit(r.as_dict(rank)) for rank, r in enumerate(results, start=1)]
        return Produced(render.search_text(query, hits), {"query": query, "results": hits},
                        [trace])

    def related(self, args: RelatedArguments) -> Produced:
        """``related``: ``GET /v1/topics/<id>/related``."""
        outcome = self.related_service.related(args.topic_id, args.limit)
        hits = [render.topic_hit(item) for item in outcome.results]
        source = outcome.source
        return Produced(render.related_text(source.topic_id, source.title, hits),
                        {"topic_id": source.topic_id, "title": source.title, "results": hits},
                        [outcome.trace])

    def retrieve(self, args: RetrieveArguments) -> Produced:
        """``retrieve``: ``POST /v1/retrieve`` (the retrieval is stored, without an asker).

        The JSON keeps the retrieval's ``prompt`` and ``abstain_text``, for a client that brings
        its own LLM and checks the reply with ``POST /v1/sanitize``; the text leaves the prompt
        out: its rules ([[n]] citations, no links, the refusal sentinel) are for a reply that
        the sanitizer finishes, which an agent's is not.
        """
        outcome = self.res.retrieval().retrieve(args.turns(), args.limit, args.locale, None)
        data = {k: v for k, v in outcome.as_dict().items() if k != "trace"}
        return Produced(render.retrieval_text(data), data, [], outcome)

    def answer(self, args: AnswerArguments) -> Produced:
        """``answer``: ``POST /v1/answer`` (not streamed; its admission, LLM and log)."""
        service = self.res.answerer()
        ticket = service.admit(None)  # no asker: the node's cap on answers in flight holds
        try:
            retrieval = service.retrieve(args.turns(), None, args.locale, None)
        except BaseException:
            ticket.release()
            raise
        body = service.answer(ticket, retrieval).as_dict()
        data = {k: v for k, v in body.items() if k != "trace"}
        return Produced(body["answer"]["markdown"], data, [], retrieval, body)


def _failed(tool: str, outcome: str, message: str) -> ToolCall:
    result = types.CallToolResult(content=[types.TextContent(type="text", text=message)],
                                  is_error=True)
    return ToolCall(tool, outcome, result)


def _problems(exc: ValidationError) -> str:
    # "query: String should have at least 1 character; limit: ...", never the input itself.
    return "; ".join(f"{'.'.join(str(p) for p in err['loc']) or 'arguments'}: {err['msg']}"
                     for err in exc.errors(include_url=False, include_input=False))
