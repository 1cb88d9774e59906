"""Condensing rules without I/O: window, cache key, prompt, output cleaning, fallback."""

from __future__ import annotations

import pytest

from sidecar.core.condense import (
    SYSTEM_PROMPT,
    Turn,
    build_messages,
    cache_key,
    clean_output,
    fallback_query,
    leans_on_previous,
    window,
)

CONV = [
    Turn("user", "How do I set up WireGuard on a VPS to get around CGNAT?"),
    Turn("assistant", "Run the server on the VPS and keep the tunnel up with PersistentKeepalive."),
    Turn("user", "and for the other one?"),
]


def test_window_keeps_the_latest_and_up_to_n_previous() -> None:
    turns = [Turn("user", f"q{i}") for i in range(6)]
    assert [t.content for t in window(turns, 3)] == ["q2", "q3", "q4", "q5"]
    assert [t.content for t in window(turns, 0)] == ["q5"]
    with_blank = [Turn("user", "a"), Turn("assistant", "  "), Turn("user", "b")]
    assert [t.content for t in window(with_blank, 3)] == ["a", "b"]


def test_cache_key_ignores_case_and_spacing_but_not_content_or_model() -> None:
    same = [Turn(t.role, "  " + t.content.upper().replace(" ", "   ")) for t in CONV]
    assert cache_key(CONV, "m") == cache_key(same, "m")
    assert cache_key(CONV, "m") != cache_key(CONV, "other-model")
    changed = [*CONV[:-1], Turn("user", "and for the first one?")]
    assert cache_key(CONV, "m") != cache_key(changed, "m")
    swapped = [Turn("assistant", CONV[0].content), *CONV[1:]]
    assert cache_key(CONV, "m") != cache_key(swapped, "m")


def test_prompt_quotes_the_transcript_and_asks_for_the_query_only() -> None:
    messages = build_messages(CONV)
    assert messages[0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert [m["role"] for m in messages] == ["system", "user"]
    body = messages[1]["content"]
    assert "Member: How do I set up WireGuard" in body
    assert "Assistant: Run the server" in body
    assert body.index("Latest member message: and for the other one?") > body.index("Assistant:")
    assert "Output only the query" in SYSTEM_PROMPT


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("WireGuard on a home server behind CGNAT", "WireGuard on a home server behind CGNAT"),
        ("<think>the user means the home server</think>\nWireGuard home server CGNAT",
         "WireGuard home server CGNAT"),
        ("<think>\nunfinished reasoning", None),
        ('Query: "WireGuard CGNAT relay"', "WireGuard CGNAT relay"),
        ("Requête : « relais WireGuard CGNAT »", "relais WireGuard CGNAT"),
        ("WireGuard CGNAT\nThis query asks about...", "WireGuard CGNAT"),
        ("   \n  ", None),
        ("", None),
        ("x " * 300, None),
    ],
)
def test_output_cleaning(raw: str, expected: str | None) -> None:
    assert clean_output(raw, max_chars=400) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("and for the other one?", "reference"),
        ("why?", "short"),
        ("What about Docker on the same box?", "reference"),
        ("Et pour le NAS du salon, même réglage ?", "reference"),
        ("celui-là consomme combien en veille exactement ?", "reference"),
        ("Does that also work on Proxmox 8?", "reference"),
        ("How do I expand a ZFS RAIDZ1 pool with bigger disks?", None),
        ("Comment configurer un VLAN IoT sur un switch manageable ?", None),
    ],
)
def test_what_leans_on_the_previous_turn(text: str, why: str | None) -> None:
    assert leans_on_previous(text) == why


def test_fallback_joins_the_previous_member_message_when_needed() -> None:
    fb = fallback_query(CONV, max_chars=2000)
    assert fb.rule == "joined_reference"
    assert fb.query == f"{CONV[0].content} and for the other one?"
    standalone = [*CONV[:-1], Turn("user", "How do I expand a ZFS RAIDZ1 pool with bigger disks?")]
    fb = fallback_query(standalone, max_chars=2000)
    assert (fb.rule, fb.query) == ("latest", standalone[-1].content)
    short = [Turn("user", "Jellyfin QuickSync in an LXC"), Turn("user", "why?")]
    assert fallback_query(short, max_chars=2000).rule == "joined_short"
    no_previous_user = [Turn("assistant", "Hello, ask me anything"), Turn("user", "and that?")]
    assert fallback_query(no_previous_user, max_chars=2000).query == "and that?"


def test_fallback_never_exceeds_the_query_limit() -> None:
    long_previous = [Turn("user", "word " * 500), Turn("user", "and for the other one?")]
    fb = fallback_query(long_previous, max_chars=300)
    assert len(fb.query) <= 300
    assert fb.query.endswith("and for the other one?")
