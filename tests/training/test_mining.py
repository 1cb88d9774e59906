"""The mining rules: which questions a thread asks, what answers them, what does not."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest

from sidecar.core.rerank_score import TITLE_SEPARATOR, Residual, rerank_passage
from sidecar.db.training_read import Thread, ThreadPost
from sidecar.training.mining import (
    Candidate,
    MiningRules,
    Question,
    answers,
    first_sentences,
    held_out,
    negatives,
    questions,
)
from sidecar.training.run import TrainOptions, split_seed

LONG = "word " * 20


def thread(topic: int = 1, *, asker: int = 10, replies: list[tuple[int, int, str]] | None = None,
           accepted: int | None = None, opening: str = "How do I grow a ZFS pool? " + LONG
           ) -> Thread:
    posts = tuple(ThreadPost(post_id=pid, post_number=n + 2, user_id=user, text=text)
                  for n, (pid, user, text) in enumerate(replies or []))
    return Thread(topic_id=topic, title="ZFS pool", accepted=accepted,
                  opening=ThreadPost(post_id=topic * 100, post_number=1, user_id=asker,
                                     text=opening), replies=posts)


def test_a_thread_asks_its_opening_post_and_its_first_sentences_never_its_title() -> None:
    t = thread(opening="How do I grow a ZFS pool? I have four disks. " + LONG)
    asked = questions(t, MiningRules())
    assert [q.kind for q in asked] == ["long", "short"]
    assert asked[0].text.startswith("How do I grow a ZFS pool? I have four disks.")
    assert asked[1].text == "How do I grow a ZFS pool? I have four disks."
    assert all(q.text != "ZFS pool" for q in asked)


def test_an_opening_post_too_short_to_ask_asks_nothing() -> None:
    assert questions(thread(opening="Help?"), MiningRules()) == []


def test_the_accepted_answer_is_the_only_positive_when_there_is_one() -> None:
    t = thread(replies=[(1, 20, "a long reply " * 10), (2, 21, "the fix " * 10)], accepted=2)
    assert [r.post_id for r in answers(t, MiningRules())] == [2]


def test_every_accepted_answer_is_a_positive_when_there_are_several() -> None:
    replies = [(1, 20, "a long reply " * 10), (2, 21, "the fix " * 10), (3, 22, "also " * 10)]
    t = replace(thread(replies=replies, accepted=3), accepted_all=(3, 2))
    assert [r.post_id for r in answers(t, MiningRules())] == [2, 3]


def test_without_one_the_first_replies_by_others_answer() -> None:
    t = thread(asker=10, replies=[(1, 10, "the asker says thanks " * 20),
                                  (2, 20, "thanks"),
                                  (3, 21, "use zpool add, it works"),
                                  (4, 22, "a much longer answer " * 10),
                                  (5, 23, "and another answer that comes late")])
    assert [r.post_id for r in answers(t, MiningRules(positives=2))] == [3, 4]
    assert [r.post_id for r in answers(t, MiningRules(positives=9))] == [3, 4, 5]


def candidate(pid: int, topic: int, cosine: float) -> Candidate:
    return Candidate(post_id=pid, topic_id=topic, title=f"topic {topic}", text=LONG,
                     cosine=cosine)


def test_negatives_never_come_from_the_question_s_topic_nor_above_its_answers() -> None:
    q = Question(topic_id=1, text="how do I grow a pool", kind="long")
    found = [candidate(1, 1, 0.9), candidate(2, 2, 0.95), candidate(3, 3, 0.5),
             candidate(4, 4, 0.6)]
    pool = [candidate(5, 1, 0.1), candidate(6, 6, 0.2)]
    pairs = negatives(q, found, pool, best_positive=0.7, rules=MiningRules(hard=5, random=5),
                      rng=random.Random(0))
    passages = {p.passage for p in pairs}
    assert {p.label for p in pairs} == {0.0}
    assert rerank_passage("topic 3", LONG) in passages
    assert rerank_passage("topic 4", LONG) in passages
    assert rerank_passage("topic 2", LONG) not in passages  # 0.95 > 0.7: likely a repeat
    assert rerank_passage("topic 1", LONG) not in passages  # its own topic
    assert sorted(p.kind for p in pairs) == ["hard", "hard", "random"]


def test_first_sentences_stop_once_long_enough() -> None:
    assert first_sentences("One two. Three four five six seven eight. Nine ten.") == \
        "One two. Three four five six seven eight."


def test_held_out_topics_are_a_stable_share() -> None:
    picked = [held_out(t, 0.2, "s") for t in range(2000)]
    assert picked == [held_out(t, 0.2, "s") for t in range(2000)]
    assert 0.15 < sum(picked) / len(picked) < 0.25
    assert picked != [held_out(t, 0.2, "other seed") for t in range(2000)]


def test_a_post_is_read_with_its_title_and_the_reranker_only_demotes_the_cosine() -> None:
    assert rerank_passage("Title", "the post") == f"Title{TITLE_SEPARATOR}the post"
    assert rerank_passage("", "the post") == "the post"
    r = Residual(model="m", strategy=1, cosine_weight=4.0, bias=-2.0)
    assert r.prior(0.5) == 0.0 and r.prior(None) == -2.0
    # a sure "answers" keeps the cosine's score; a sure "does not" lowers it by about the logit
    assert r.score(30.0, 0.5) == pytest.approx(0.0, abs=1e-9)
    assert r.score(-30.0, 0.5) == pytest.approx(-30.0, abs=1e-9)
    assert r.score(0.0, 0.5) == pytest.approx(-math.log(2))
    # never above the prior, whatever the logit (an off-topic question is never lifted)
    assert all(r.score(x, 0.1) <= r.prior(0.1) for x in (-800.0, -3.0, 0.0, 3.0, 800.0))


def test_each_run_holds_out_the_topics_of_a_fresh_seed_unless_given_one() -> None:
    # A fixed public seed would tell anyone which topics the guard measures on.
    assert TrainOptions().seed is None
    seeds = {split_seed(TrainOptions()) for _ in range(5)}
    assert len(seeds) == 5
    assert split_seed(TrainOptions(seed="evaluation")) == "evaluation"
    first, second = sorted(seeds)[:2]
    assert [held_out(t, 0.3, first) for t in range(200)] != \
        [held_out(t, 0.3, second) for t in range(200)]
