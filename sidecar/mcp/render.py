"""The tools' results as the Markdown an LLM reads (pure: no I/O).

MCP clients hand a tool's text content to their LLM (discourse-ai joins the text blocks and
uses ``structuredContent`` only when there is none), so the text says everything the LLM needs:
each topic's title, its post-level link and an excerpt; for a retrieval, the zone with what it
allows and the numbered evidence. The same data, as JSON, is the result's
``structuredContent``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# What each zone allows (docs/answerability.md), in words an agent's LLM acts on.
ZONE_GUIDANCE = {
    "normal": "The evidence answers the question: answer from it alone and cite each point as "
              "[n] with its link.",
    "cautious": "The evidence answers only in part, or not surely: answer from it, say what it "
                "leaves open, and cite each point as [n] with its link.",
    "abstain": "The forum's public posts do not answer this: say so plainly and do not guess; "
               "the member may ask the forum itself.",
}


def topic_hit(item: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a ranked topic (``/v1/search``'s or ``/v1/topics/<id>/related``'s shape)
    that a tool's caller reads."""
    post = item["post"]
    return {"rank": item["rank"], "topic_id": item["topic_id"], "title": item["title"],
            "category": item["category"], "url": item["url"],
            "post_number": post["post_number"], "excerpt": post["excerpt"],
            "score": item["score"]}


def topic_list(heading: str, hits: Sequence[Mapping[str, Any]], empty: str) -> str:
    """A numbered list of topics, each a link to its post, its category and an excerpt."""
    if not hits:
        return empty
    lines = [heading, ""]
    for hit in hits:
        category = f" ({hit['category']})" if hit["category"] else ""
        lines.append(f"{hit['rank']}. [{_link_text(hit['title'])}]({hit['url']}){category}")
        if hit["excerpt"]:
            lines.append(f"   {_one_line(hit['excerpt'])}")
    return "\n".join(lines)


def search_text(query: str, hits: Sequence[Mapping[str, Any]]) -> str:
    """``search``'s result."""
    return topic_list(f"Topics found for \"{query}\", best first:", hits,
                      f"No public topic matches \"{query}\".")


def related_text(topic_id: int, title: str, hits: Sequence[Mapping[str, Any]]) -> str:
    """``related``'s result."""
    return topic_list(f"Topics related to \"{title}\" (topic {topic_id}), best first:", hits,
                      f"No public topic is related to \"{title}\" (topic {topic_id}).")


def retrieval_text(data: Mapping[str, Any]) -> str:
    """``retrieve``'s result: the zone and what it allows, then the numbered evidence."""
    zone = data["zone"]
    lines = [f"Zone: {zone}. {ZONE_GUIDANCE.get(zone, '')}".rstrip(),
             f"Why: {data['zone_reason']}"]
    if data.get("query"):
        lines.append(f"Question searched: {data['query']}")
    for item in data["evidence"]:
        lines += ["", f"[{item['n']}] {item['title']}", item["url"], _one_line(item["excerpt"])]
    if not data["evidence"]:
        lines += ["", "No evidence."]
    if data.get("abstain_text"):
        lines += ["", "The forum's own words for this case, to give the member as they are:",
                  "", data["abstain_text"]]
    return "\n".join(lines)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _link_text(title: str) -> str:
    # A bracket in a title would end the Markdown link's text early.
    return _one_line(title).replace("[", "(").replace("]", ")")
