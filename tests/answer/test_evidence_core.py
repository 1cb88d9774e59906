"""Evidence items without I/O: plain text, passage cut, numbering and neighbours."""

from __future__ import annotations

from sidecar.core.evidence import PostText, evidence_item, passage, plain_text
from sidecar.core.text import cook


def test_plain_text_drops_quotes_markup_and_keeps_a_quote_only_post() -> None:
    cooked = cook('[quote="bob, post:2, topic:9"]\nuse **MTU 1420**\n[/quote]\n\n'
                  "Thanks, but [the wiki](https://x.org) says *1380* for PPPoE.")
    text = plain_text(cooked)
    assert text == "Thanks, but the wiki says 1380 for PPPoE."
    only_quote = cook('[quote="bob"]\nuse MTU 1420\n[/quote]')
    assert plain_text(only_quote) == "use MTU 1420"


def test_passage_is_cut_on_a_word_boundary() -> None:
    text = "word " * 1000
    cut = passage(text, 2000)
    assert len(cut) <= 2000 and cut.endswith("word") and not cut.endswith(" ")
    assert passage("short  text\n here") == "short text here"


def test_evidence_item_shape_and_targeted_excerpt() -> None:
    body = ("Intro about the hardware. " * 20 + "Set PersistentKeepalive = 25 on the home peer "
            "so the CGNAT mapping stays open. " + "Unrelated closing remarks. " * 20)
    post = PostText(post_id=72, topic_id=9, post_number=3, title="WireGuard and CGNAT",
                    url="https://f.example/t/wg/9/3", text=body)
    later = PostText(post_id=75, topic_id=9, post_number=6, title="WireGuard and CGNAT",
                     url="https://f.example/t/wg/9/6", text="It works now.")
    earlier = PostText(post_id=70, topic_id=9, post_number=1, title="WireGuard and CGNAT",
                       url="https://f.example/t/wg/9/1", text="My ISP uses CGNAT.")
    item = evidence_item(1, post, 0.123456789, "PersistentKeepalive CGNAT", 120,
                         [later, earlier])
    assert {k: item[k] for k in ("n", "topic_id", "post_id", "post_number", "url", "title")} == {
        "n": 1, "topic_id": 9, "post_id": 72, "post_number": 3,
        "url": "https://f.example/t/wg/9/3", "title": "WireGuard and CGNAT"}
    assert item["score"] == 0.123457
    assert "PersistentKeepalive" in item["excerpt"] and len(item["excerpt"]) <= 124
    assert [nb["post_number"] for nb in item["neighbours"]] == [1, 6]
    assert item["neighbours"][0] == {"post_id": 70, "post_number": 1,
                                     "url": "https://f.example/t/wg/9/1",
                                     "excerpt": "My ISP uses CGNAT."}
    assert evidence_item(2, post, None, "x", 320)["score"] is None
