"""deploy/discourse/already-asked-tool.js in V8, as the ai_tool_action automation runs it on a
post created or edited, against the real sidecar (/v1/similar over HTTP)."""

from __future__ import annotations

import json
import re

from tests.discourse.conftest import (
    BOT_ID,
    MEMBER,
    MEMBER_ID,
    MEMBER_NAME,
    automation_context,
    new_topic,
    run_tool,
)
from tests.discourse.forum import SYSTEM_USER_ID, Forum
from tests.discourse.network import Network, Route

TOOL = "already-asked-tool.js"
FIELD = "sidecar_already_asked"
CGNAT = ("Reaching my home WireGuard server when my ISP uses CGNAT",
         "My new fibre plan put me behind carrier-grade NAT and I can no longer reach my "
         "WireGuard server at home from my phone. Is there a way around it?")
SOURDOUGH = ("Best sourdough starter?", "How often should I feed it?")


def field(forum: Forum, topic_id: int) -> str | None:
    rows = forum.sql("SELECT value FROM topic_custom_fields WHERE topic_id = %s AND name = %s",
                     topic_id, FIELD)
    return rows[0]["value"] if rows else None


def test_replies_once_with_post_links_and_never_again(forum: Forum, network: Network) -> None:
    topic, post = new_topic(forum, *CGNAT)
    run = run_tool(TOOL, automation_context(forum, post), network, forum)

    assert run.result["replied"] is True and 9 in run.result["topics"]
    assert [s.url for s in run.sent] == ["http://sidecar.internal/v1/similar"]
    body = json.loads(run.sent[0].body)
    assert body["title"] == CGNAT[0] and body["raw"] == CGNAT[1]
    assert run.sent[0].status == 200
    (reply,) = run.created
    assert (reply["topic_id"], reply["user_id"], reply["post_number"]) == (topic, SYSTEM_USER_ID, 2)
    links = re.findall(r"\]\((\S+)\)", reply["raw"])
    assert links and all(re.fullmatch(r"https://forum\.example\.org/t/[\w-]+/\d+/\d+", u)
                         for u in links)
    assert any("/9/" in u for u in links)  # the WireGuard-behind-CGNAT topic, at a post
    assert f"/{topic}/" not in reply["raw"]  # never the new topic itself
    assert field(forum, topic) == str(reply["post_id"])
    sent = json.dumps([s.__dict__ for s in run.sent])
    assert MEMBER not in sent and str(MEMBER_ID) not in sent and MEMBER_NAME not in sent
    assert run.js_ms < 2000 and len(run.sent) <= 20

    again = run_tool(TOOL, automation_context(forum, post), network, forum)  # the post edited
    assert again.result == {"replied": False, "reason": "topic has replies"}
    assert again.sent == [] and again.created == []


def test_the_custom_field_alone_keeps_an_edit_from_posting_twice(
        forum: Forum, network: Network) -> None:
    topic, post = new_topic(forum, *CGNAT)
    first = run_tool(TOOL, automation_context(forum, post), network, forum)
    assert first.result["replied"] is True
    # The reply gone (moved away, deleted): the topic looks new again, the field remains.
    forum.sql("DELETE FROM posts WHERE topic_id = %s AND post_number > 1", topic)
    forum.sql("UPDATE topics SET posts_count = 1, highest_post_number = 1, reply_count = 0"
              " WHERE id = %s", topic)
    again = run_tool(TOOL, automation_context(forum, post), network, forum)
    assert again.result == {"replied": False, "reason": "already replied"}
    assert again.sent == [] and again.created == []


def test_silent_when_the_sidecar_is_unsure(forum: Forum, network: Network) -> None:
    topic, post = new_topic(forum, *SOURDOUGH, category_id=6)
    run = run_tool(TOOL, automation_context(forum, post), network, forum)
    assert run.result == {"replied": False, "reason": "silent"}
    assert len(run.sent) == 1 and json.loads(run.sent[0].body)["title"] == SOURDOUGH[0]
    assert run.created == [] and field(forum, topic) is None


def test_silent_in_a_pm_for_a_bot_on_a_reply_and_in_a_staff_category(
        forum: Forum, network: Network) -> None:
    _, pm_post = new_topic(forum, *CGNAT, private_with=(9,))
    _, bot_post = new_topic(forum, *CGNAT, user_id=BOT_ID)
    _, staff_post = new_topic(forum, *CGNAT, category_id=7)
    topic, _ = new_topic(forum, *CGNAT)
    forum.sql("UPDATE topics SET posts_count = 2, highest_post_number = 2 WHERE id = %s", topic)
    reply = forum.sql("""INSERT INTO posts (id, user_id, topic_id, post_number, raw, cooked,
                                            created_at, updated_at, last_version_at)
                         SELECT max(id) + 1, 9, %s, 2, 'Same here', '<p>Same here</p>', now(),
                                now(), now() FROM posts RETURNING id""", topic)[0]["id"]
    reasons = {}
    for name, post in {"pm": pm_post, "bot": bot_post, "staff": staff_post,
                       "reply": reply}.items():
        run = run_tool(TOOL, automation_context(forum, post), network, forum)
        assert run.sent == [] and run.created == [], name
        reasons[name] = run.result["reason"]
    assert reasons == {"pm": "private message", "bot": "written by a bot",
                       "staff": "not a public topic", "reply": "not a first post"}


def test_silent_on_error(forum: Forum, network: Network, free_port: str,
                         silent_server: str) -> None:
    topic, post = new_topic(forum, *CGNAT)
    down = Network(routes={"sidecar.internal": Route("10.0.0.7", free_port)},
                   allowed_internal_hosts=["sidecar.internal"])
    hung = Network(routes={"sidecar.internal": Route("10.0.0.7", silent_server)},
                   allowed_internal_hosts=["sidecar.internal"], read_timeout_s=1.0)
    not_allowed = Network(routes=network.routes)  # allowed_internal_hosts left empty
    cases = {"down": (down, {}), "hung": (hung, {}), "not allowed": (not_allowed, {}),
             "port 8340": (network, {"sidecar_url": "http://sidecar.internal:8340"}),
             "wrong key": (network, {"sidecar_api_key": "not-the-key-0000000000000000"})}
    for name, (net, bound) in cases.items():
        run = run_tool(TOOL, automation_context(forum, post), net, forum, **bound)
        assert run.created == [] and field(forum, topic) is None, name
        assert run.result["replied"] is False, name
        assert len(run.sent) == 1, name
    assert run.sent[0].status == 401
