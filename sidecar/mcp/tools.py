"""What each MCP tool takes and what it is for.

A tool's arguments are a pydantic model: it validates a call, and its JSON schema, flattened
(no ``$ref``, no ``anyOf`` with null, no titles), is the ``inputSchema`` that ``tools/list``
publishes, so what an LLM is told and what is checked cannot drift apart. The models are lax
about types (an LLM may send ``"5"`` for 5) and strict about names (an unknown argument is an
error the LLM can read and correct).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as types
from pydantic import BaseModel, ConfigDict, Field

from sidecar.core.condense import Turn
from sidecar.related.service import MAX_LIMIT as RELATED_MAX

MAX_HISTORY = 20  # earlier messages of a conversation: more says nothing the condenser reads
MAX_MESSAGE_CHARS = 20_000  # as /v1/retrieve's messages
LOCALE = r"^[A-Za-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})*$"  # as /v1/retrieve's locale


class ToolArguments(BaseModel):
    """Arguments of a tool: unknown names are refused, types are coerced where unambiguous."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class SearchArguments(ToolArguments):
    """``search``."""

    query: str = Field(min_length=1, description=(
        "What to look for: the member's question or a few keywords, in the forum's language."))
    limit: int = Field(default=5, ge=1, le=20, description="How many topics to return (1-20).")


class Message(ToolArguments):
    """One earlier message of the conversation."""

    role: Literal["user", "assistant"] = Field(description=(
        "user: the member who asks; assistant: the forum's assistant (you)."))
    content: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)


class QuestionArguments(ToolArguments):
    """A member's question, with the conversation it follows up on."""

    question: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS, description=(
        "The member's question, in their own words and language."))
    history: list[Message] = Field(default_factory=list, max_length=MAX_HISTORY, description=(
        "Earlier messages of the conversation, oldest first, when the question follows up on "
        "them (so that 'which one would you use?' is understood). Empty for a standalone "
        "question."))
    locale: str | None = Field(default=None, pattern=LOCALE, max_length=35, description=(
        "The member's language as a locale code, e.g. fr or en-GB (optional)."))

    def turns(self) -> list[Turn]:
        """The conversation as the pipeline reads it: the history, then the question."""
        return [*(Turn(m.role, m.content) for m in self.history), Turn("user", self.question)]


class RetrieveArguments(QuestionArguments):
    """``retrieve``."""

    limit: int | None = Field(default=None, ge=1, le=12, description=(
        "How many evidence items to return (1-12; default 6)."))


class AnswerArguments(QuestionArguments):
    """``answer``."""


class RelatedArguments(ToolArguments):
    """``related``."""

    topic_id: int = Field(ge=1, le=2**31 - 1, description=(
        "The topic's id: the number after the title in a topic link, e.g. 123 in "
        "https://forum.example.org/t/some-title/123/4."))
    limit: int = Field(default=5, ge=1, le=RELATED_MAX,
                       description=f"How many related topics to return (1-{RELATED_MAX}).")


@dataclass(frozen=True)
class ToolSpec:
    """One tool: its name, title, description and arguments."""

    name: str
    title: str
    description: str  # may name {forum}: the forum's address
    arguments: type[ToolArguments]

    def definition(self, forum: str) -> types.Tool:
        """The tool as ``tools/list`` lists it."""
        return types.Tool(
            name=self.name, title=self.title,
            description=self.description.format(forum=forum or "this forum"),
            input_schema=input_schema(self.arguments),
            annotations=types.ToolAnnotations(title=self.title, read_only_hint=True,
                                              open_world_hint=False))


SEARCH = ToolSpec(
    "search", "Search the forum",
    "Search the public posts of the forum {forum}. Returns up to `limit` topics, best first, "
    "each with its title, category, an excerpt and a link to the post that answers (the "
    "accepted answer, else the best reply). Use it to find discussions and to point the member "
    "at them; cite the links as given. Only public posts are searched.",
    SearchArguments)
RETRIEVE = ToolSpec(
    "retrieve", "Evidence to answer a question",
    "Gather the evidence to answer a member's question from the public posts of the forum "
    "{forum}. Returns a zone and numbered evidence items [n] (title, link, excerpt). The zone "
    "says what you may do: normal, the evidence answers: answer from it alone and cite each "
    "point as [n] with its link; cautious, it answers only in part: answer from it, say what it "
    "leaves open; abstain, the forum does not answer this: say so, do not guess. Pass the "
    "earlier messages in `history` when the question follows up on them.",
    RetrieveArguments)
ANSWER = ToolSpec(
    "answer", "Answer from the forum",
    "Answer a member's question from the public posts of the forum {forum}, written by the "
    "forum's own assistant: returns Markdown ready to show as it is, each point cited with a "
    "link to the post it comes from, or, when the forum's posts do not answer, the forum's "
    "own text saying so (never a guess). Pass the earlier messages in `history` when the "
    "question follows up on them.",
    AnswerArguments)
RELATED = ToolSpec(
    "related", "Related topics",
    "Topics of the forum {forum} related to a topic, given its id (the number after the title "
    "in a topic link). Returns up to `limit` public topics, best first, each with a link to the "
    "post that answers. Use it to suggest further reading on a topic the member is on.",
    RelatedArguments)


def input_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema as a tool's ``inputSchema``: one flat object.

    References are inlined and an optional field is its type (absent, never null): clients
    pass the schema on to LLM APIs that read few JSON Schema keywords (discourse-ai resolves
    ``$ref`` and ``anyOf`` itself, others do not); titles repeat the names and are dropped, and
    so is the model's own description (the tool's is its ``description``).
    """
    schema = model.model_json_schema()
    definitions = schema.pop("$defs", {})
    schema.pop("description", None)  # the model's docstring, written for this code's readers
    flat: dict[str, Any] = _flatten(schema, definitions)
    return flat


def _flatten(node: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(node, list):
        return [_flatten(item, definitions) for item in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        target = definitions[node["$ref"].rsplit("/", 1)[-1]]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    options = node.get("anyOf")
    if isinstance(options, list) and {"type": "null"} in options and len(options) == 2:
        (kept,) = [o for o in options if o != {"type": "null"}]
        node = {**{k: v for k, v in node.items() if k not in ("anyOf", "default")},
                **_flatten(kept, definitions)}
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title":
            continue  # a keyword here: property names are the keys of "properties" below
        if key == "properties":
            out[key] = {name: _flatten(prop, definitions) for name, prop in value.items()}
        else:
            out[key] = _flatten(value, definitions)
    return out


def instructions(forum: str, *, answer: bool) -> str:
    """What ``initialize`` tells a client about this server (clients may add it to their LLM's
    system prompt); ``answer``: the ``answer`` tool is served."""
    answering = ("`answer` writes a cited answer with the forum's own assistant; " if answer
                 else "")
    return (f"Tools over the public posts of the forum {forum or '(this forum)'}. {answering}"
            "`search` finds topics; `retrieve` gathers numbered evidence to answer a member's "
            "question (answer only from it, cite [n] with its link, and say so when its zone is "
            "abstain); `related` lists the topics related to a topic. Links point at the post "
            "that answers. Private content is never searched.")
