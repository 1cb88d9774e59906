"""A streamed answer is only ever sanitizer output: checked links, whole citations (pure)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.core.sanitize import sanitize_answer
from sidecar.core.stream_sanitize import StreamSanitizer, safe_cut
from tests.sanitize.checker import audit
from tests.sanitize.test_sanitize_core import ALLOWED, EVIDENCE, FRAGMENTS, PUBLIC, SITE


def body(text: str) -> str:
    return sanitize_answer(text, EVIDENCE, PUBLIC, SITE, "en", footer=False).text


def stream(reply: str, size: int = 1, min_step: int = 1) -> tuple[StreamSanitizer, list[str]]:
    streamer = StreamSanitizer(body, min_step=min_step)
    states = []
    for i in range(0, len(reply), size):
        if streamer.feed(reply[i:i + size]):
            states.append(streamer.sent)
    return streamer, states


def test_safe_cut_stops_before_anything_open() -> None:
    assert safe_cut("Use a relay [[1") == len("Use a relay ")
    assert safe_cut("see [the doc](http://x.org/a b") == len("see ")
    assert safe_cut("run `zpool  status` now ") == len("run `zpool  status` now ")
    assert safe_cut("run `zpool  stat") == len("run ")
    assert safe_cut("```\ncode here\n") == 0
    assert safe_cut("a <b  c") == len("a ")
    assert safe_cut("escaped \\[ bracket ") == len("escaped \\[ bracket ")
    assert safe_cut("no space") == len("no ")


def test_a_citation_is_sent_only_once_it_is_whole_and_checked() -> None:
    _, states = stream("Relay through a VPS [[1]] and keep it alive [[9]] as told. ")
    assert states and all("[[" not in s for s in states)
    assert "[1](https://forum.example.org/t/slug-1/1/1)" in states[-1]
    assert "9" not in states[-1].replace("[1]", "")


def test_a_url_is_sent_only_after_the_sanitizer_saw_it_whole() -> None:
    _, states = stream("Read http://evil.example/very/long/path?x=1 for more. ")
    assert all("evil" not in s for s in states)
    assert "(link removed)" in states[-1]


def test_the_refusal_sends_nothing() -> None:
    streamer, states = stream("NO_ANSWER because the posts are about ZFS. ")
    assert states == [] and streamer.diverged


def test_a_reasoning_models_thinking_is_never_sent() -> None:
    _, states = stream("<think>the user wants [[1]] http://evil.example</think>Use a relay. ")
    assert states and all("think" not in s and "evil" not in s for s in states)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(FRAGMENTS), max_size=25), st.integers(1, 7))
def test_property_every_state_the_member_holds_is_sanitizer_output(parts: list[str],
                                                                   size: int) -> None:
    _, states = stream("".join(parts), size)
    for before, state in zip(["", *states], states, strict=False):
        assert state.startswith(before)  # sent text only ever grows by appending
        assert audit(state, ALLOWED) == []  # and holds only links to public evidence
