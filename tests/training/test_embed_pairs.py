"""The bi-encoder's pairs: what a thread teaches, and batches whose negatives are other threads."""

from __future__ import annotations

import random

from sidecar.core.strategy import PostSource, strategy_text
from sidecar.db.training_read import Thread, ThreadPost
from sidecar.training.embed_pairs import (
    EmbedPair,
    EmbedRules,
    answer_posts,
    ask_text,
    batches,
    thread_pairs,
    with_negatives,
)

REPLY = "Use zpool add with a new vdev of the same width, then scrub."


def thread(topic: int = 1, *, asker: int = 10, accepted: int | None = None,
           replies: list[tuple[int, int, str]] | None = None,
           accepted_all: tuple[int, ...] = ()) -> Thread:
    posts = tuple(ThreadPost(post_id=pid, post_number=n + 2, user_id=user, text=text)
                  for n, (pid, user, text) in enumerate(replies or []))
    return Thread(topic_id=topic, title="Growing a ZFS pool", accepted=accepted, replies=posts,
                  accepted_all=accepted_all or ((accepted,) if accepted else ()),
                  opening=ThreadPost(post_id=topic * 100, post_number=1, user_id=asker,
                                     text="How do I grow a RAIDZ pool with four new disks? " * 20))


def sources(t: Thread, extra: list[PostSource] | None = None) -> dict[int, PostSource]:
    posts = [t.opening, *t.replies]
    out = {p.post_id: PostSource(post_id=p.post_id, topic_id=t.topic_id,
                                 post_number=p.post_number, title=t.title, category="Storage",
                                 tags=("zfs",), text=p.text) for p in posts}
    out.update({s.post_id: s for s in extra or []})
    return out


def test_the_accepted_answer_comes_first_then_replies_by_others_never_the_askers() -> None:
    t = thread(asker=10, accepted=4, replies=[(2, 10, "I tried that already, it did not work."),
                                              (3, 20, "ok"), (5, 21, REPLY),
                                              (4, 22, "Replace each disk in turn, autoexpand=on.")])
    assert answer_posts(t, EmbedRules(replies=2)) == [4, 5]
    assert answer_posts(t, EmbedRules(replies=1)) == [4]


def test_every_accepted_answer_comes_before_the_other_replies() -> None:
    t = thread(asker=10, accepted=6, accepted_all=(6, 4),
               replies=[(4, 22, "Replace each disk in turn, autoexpand=on."), (5, 21, REPLY),
                        (6, 23, "Or add a second RAIDZ vdev of the same width.")])
    assert answer_posts(t, EmbedRules(replies=3)) == [4, 6, 5]
    kinds = [p.kind for p in thread_pairs(t, sources(t), 1, EmbedRules(replies=3))]
    assert kinds == ["title", "accepted", "accepted", "reply"]


def test_a_thread_teaches_title_to_opening_post_and_its_ask_to_its_answers() -> None:
    t = thread(accepted=5, replies=[(5, 21, REPLY)])
    pairs = thread_pairs(t, sources(t), 1, EmbedRules())
    assert [p.kind for p in pairs] == ["title", "accepted"]
    title, answer = pairs
    assert title.query == "Growing a ZFS pool"
    # The passages are the exact texts the indexer embeds for those posts.
    assert title.positive == strategy_text(sources(t)[100], 1)
    assert answer.positive == strategy_text(sources(t)[5], 1)
    assert answer.query.startswith("Growing a ZFS pool\n\nHow do I grow a RAIDZ pool")
    assert len(answer.query) <= len("Growing a ZFS pool\n\n") + EmbedRules().ask_chars


def test_the_ask_is_cut_at_a_word() -> None:
    t = thread()
    ask = ask_text(t, 50)
    body = ask.split("\n\n", 1)[1]
    assert len(body) <= 50 and t.opening.text.startswith(body) and not body.endswith(" ")


def test_a_reply_linking_another_public_topic_ties_the_two_a_missing_one_teaches_nothing() -> None:
    t = thread(replies=[(5, 21, REPLY)])
    other = PostSource(post_id=900, topic_id=9, post_number=1, title="RAIDZ expansion",
                       category="Storage", tags=(), text="OpenZFS 2.3 expands RAIDZ in place.")
    pairs = thread_pairs(t, sources(t, [other]), 1, EmbedRules(), linked=[900, 901])
    links = [p for p in pairs if p.kind == "link"]
    assert [(p.topic_id, p.target_topic) for p in links] == [(1, 9)]
    assert thread_pairs(t, sources(t, [other]), 1, EmbedRules(links=False), linked=[900]) \
        == [p for p in pairs if p.kind != "link"]


def test_a_post_the_public_filter_left_out_is_never_a_passage() -> None:
    t = thread(accepted=5, replies=[(5, 21, REPLY)])
    readable = sources(t)
    del readable[5]  # not public: post_sources did not return it
    assert [p.kind for p in thread_pairs(t, readable, 1, EmbedRules())] == ["title"]


def test_hard_negatives_skip_the_own_topics_and_anything_as_close_as_the_answer() -> None:
    pair = EmbedPair("q", "answer", 1, "reply", 2)
    found = [(1, "own topic", 0.5), (2, "linked topic", 0.5), (3, "a repeat", 0.9),
             (4, "close", 0.7), (5, "far", 0.3)]
    picked = with_negatives(pair, found, 0.8, EmbedRules(hard_negatives=3))
    assert picked.negatives == ("close", "far")


def test_no_batch_holds_two_pairs_of_one_topic() -> None:
    pairs = [EmbedPair(f"q{t}-{k}", f"p{t}-{k}", t, "reply", t if k else t + 1)
             for t in range(0, 60, 2) for k in range(3)]
    out = batches(pairs, 8, 1.0, random.Random(0))
    assert len(out) == round(len(pairs) / 8) and all(2 <= len(b) <= 8 for b in out)
    for batch in out:
        topics = [x for p in batch for x in {p.topic_id, p.target_topic}]
        assert len(topics) == len(set(topics))
    assert sum(len(b) for b in out) <= len(pairs)
    assert len(batches(pairs, 8, 2.0, random.Random(0))) == round(len(pairs) * 2 / 8)
