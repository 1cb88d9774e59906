"""The test tool runner keeps discourse-ai's rules: were it laxer than Discourse, a tool passing
here could fail on a real forum. Each limit is shown with a small script of its own."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import pytest
from py_mini_racer import JSOOMException

from tests.discourse.conftest import MEMBER_ID
from tests.discourse.discourse_api import DiscourseApi
from tests.discourse.forum import Forum
from tests.discourse.harness import StandInLLM, Tool, ToolError, ToolRunner
from tests.discourse.network import Network, Route

PM_TOPIC = 10  # the demo's PM between priya_s and mike_homelab


def run(script: str, network: Network, forum: Forum, *, secrets: dict[str, Any] | None = None,
        llm: StandInLLM | None = None, timeout_ms: int = 2000, context: Any = None) -> Any:
    tool = Tool(script, secrets or {})
    return ToolRunner(tool, context or {}, network, DiscourseApi(forum), llm,
                      timeout_ms=timeout_ms).invoke({"n": 25})


def test_twenty_requests_then_the_runner_refuses(network: Network, forum: Forum) -> None:
    result = run("""function invoke(p) {
        const statuses = [];
        const url = "http://sidecar.internal/v1/health";
        try { for (let i = 0; i < p.n; i++) statuses.push(http.get(url).status); }
        catch (e) { return {statuses: statuses, error: e.message}; }
        return {statuses: statuses}; }""", network, forum)
    assert result.result["error"] == "Tool made too many HTTP requests"
    assert result.result["statuses"] == [200] * 20 and len(result.sent) == 21
    assert result.sent[0].headers["User-Agent"] == "Discourse AI Bot 1.0 (https://www.discourse.org)"


def test_script_time_is_cut_and_no_catch_stops_it(network: Network, forum: Forum) -> None:
    result = run("""function invoke() { try { while (true) {} } catch (e) { return "caught"; } }""",
                 network, forum, timeout_ms=300)
    assert result.result == {"error": "Script terminated due to timeout"}
    assert result.js_ms >= 300


def test_the_clock_stops_while_the_host_answers(network: Network, forum: Forum,
                                                silent_server: str) -> None:
    hung = Network(routes={"slow.internal": Route("10.0.0.8", silent_server)},
                   allowed_internal_hosts=["slow.internal"], read_timeout_s=0.4)
    result = run("""function invoke() { const errors = [];
        for (let i = 0; i < 3; i++) { try { http.get("http://slow.internal/"); }
                                      catch (e) { errors.push(e.message); } }
        return errors; }""", hung, forum, timeout_ms=300)
    assert result.result == ["Net::ReadTimeout with #<TCPSocket:(closed)>"] * 3  # 1.2 s waited
    assert result.js_ms < 300


def test_memory_is_capped_at_ten_megabytes(network: Network, forum: Forum) -> None:
    with pytest.raises(JSOOMException):
        run("""function invoke() { const a = []; for (;;) a.push("x".repeat(64) + a.length); }""",
            network, forum)


def test_secrets_crypto_and_the_prompt_checks(network: Network, forum: Forum) -> None:
    llm = StandInLLM(reply="fine")
    result = run("""function invoke() {
        const out = {mac: crypto.hmacSha256(secrets.get("k"), "48213")};
        try { secrets.get("undeclared"); } catch (e) { out.undeclared = e.message; }
        out.ok = llm.generate({messages: [{type: "system", content: "s"},
                                          {type: "user", content: "u"}]});
        for (const bad of [[{type: "user", content: "u"}, {type: "system", content: "s"}],
                           [{type: "assistant", content: "a"}]]) {
          try { llm.generate({messages: bad}); }
          catch (e) { (out.bad = out.bad || []).push(e.message); }
        }
        return out; }""", network, forum, secrets={"k": "the-secret"}, llm=llm)
    expected = hmac.new(b"the-secret", b"48213", hashlib.sha256).hexdigest()
    assert result.result["mac"] == expected
    assert "not declared" in result.result["undeclared"]
    assert result.result["ok"] == "fine" and len(llm.prompts) == 1
    assert "INVALID_TURN" in result.result["bad"][0] and "type" in result.result["bad"][1]
    with pytest.raises(ToolError, match="missing required aliases: k"):
        run("function invoke() { return 1; }", network, forum, secrets={"k": None})


def test_reads_follow_the_members_guardian(network: Network, forum: Forum) -> None:
    result = run(f"""function invoke() {{
        const asMember = discourse.getTopicPosts({PM_TOPIC}, {{as_user_id: {MEMBER_ID}}});
        const asSystem = discourse.getTopicPosts({PM_TOPIC}, {{limit: 2}});
        const staff = discourse.filterTopics({{q: "category:staff"}}).topics.length;
        const listed = discourse.filterTopics({{q: "category:networking"}}).topics.length;
        let bad;
        try {{ discourse.getTopicPosts(9, {{limit: 2, post_numbers: [1]}}); }}
        catch (e) {{ bad = e.message; }}
        return {{asMember: asMember.length, asSystem: asSystem.map(p => p.post_number),
                 staff: staff, listed: listed, bad: bad}}; }}""", network, forum)
    assert result.result == {"asMember": 0, "asSystem": [1, 2], "staff": 0,
                             "listed": result.result["listed"],
                             "bad": "limit and post_numbers cannot be used together"}
    assert result.result["listed"] > 0
