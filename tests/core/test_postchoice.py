"""The post chooser: which post of a ranked topic the link points at (pure)."""

from __future__ import annotations

import pytest

from sidecar.core.postchoice import (
    ANSWER_RULE,
    Chooser,
    LinkRule,
    PostFeatures,
    choose,
)


def post(pid: int, number: int, sim: float | None, **kw: object) -> PostFeatures:
    return PostFeatures(post_id=pid, post_number=number, similarity=sim, **kw)  # type: ignore[arg-type]


QUESTION = post(1, 1, 0.80, fused=0.9)  # the opening post repeats the question's words
ASKER = post(2, 2, 0.75, by_asker=True, fused=0.7)  # "thanks, it works"
ANSWER = post(3, 3, 0.60)
OTHER = post(4, 4, 0.55, fused=0.5)


def test_the_reply_that_answers_is_linked_not_the_question() -> None:
    choice = choose([QUESTION, ASKER, ANSWER, OTHER])
    assert choice.order == (3, 4, 2, 1)
    assert choice.reason == "reply most similar to the question"


def test_the_accepted_answer_wins_whatever_its_similarity() -> None:
    accepted = post(4, 4, 0.10, accepted=True)
    choice = choose([QUESTION, ASKER, ANSWER, accepted])
    assert choice.order[0] == 4
    assert choice.reason == "accepted answer"


def test_keywords_break_near_ties_between_replies() -> None:
    a = post(5, 2, 0.600, keyword=0.0)
    b = post(6, 3, 0.595, keyword=1.0)
    assert choose([a, b]).order[0] == 6


def test_without_other_replies_the_askers_then_the_opening_post() -> None:
    assert choose([QUESTION, ASKER]).order == (2, 1)
    assert choose([QUESTION, ASKER]).reason == "reply by the asker (no other reply)"
    only = choose([QUESTION])
    assert only.order == (1,) and only.reason == "opening post (no reply to link)"


def test_the_other_choosers() -> None:
    posts = [QUESTION, ASKER, ANSWER, OTHER]
    assert choose(posts, Chooser.FUSED).order == (1, 2, 4, 3)  # unfused posts last
    assert choose(posts, Chooser.SEMANTIC).order == (1, 2, 3, 4)
    no_vector = post(7, 5, None)
    assert choose([no_vector, OTHER], Chooser.SEMANTIC).order == (4, 7)


def test_a_learned_rule_is_used_and_named() -> None:
    likes = LinkRule.of({"similarity": 1.0, "likes": 0.5}, "tuned on 120 labels")
    liked = post(8, 5, 0.50, likes=20)
    choice = choose([ANSWER, liked], rule=likes)
    assert choice.order[0] == 8
    assert choice.reason == "learned rule (tuned on 120 labels)"
    assert choice.scores[3] == pytest.approx(0.60)


def test_rules_refuse_unknown_features_and_non_finite_weights() -> None:
    with pytest.raises(ValueError, match="unknown"):
        LinkRule.of({"length": 1.0}, "x")
    with pytest.raises(ValueError, match="finite"):
        LinkRule.of({"similarity": float("nan")}, "x")
    with pytest.raises(ValueError, match="at least one post"):
        choose([])
    assert ANSWER_RULE.source == "fixed"
