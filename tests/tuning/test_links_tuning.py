"""Learning the linked post's rule, behind its held-out guard."""

from __future__ import annotations

import random

import pytest

from sidecar.core.postchoice import ANSWER_RULE, PostFeatures, choose
from sidecar.tuning.links import MIN_LABELS, Labelled, LinkLabel, tune_links


def topic(i: int, rng: random.Random, *, liked_answers: bool) -> Labelled:
    """Four replies; the answer is the most liked one (when ``liked_answers``) while another
    reply is the most similar to the question."""
    posts = [PostFeatures(post_id=i * 10 + n, post_number=n + 1,
                          similarity=rng.uniform(0.3, 0.6), likes=rng.randint(0, 2))
             for n in range(1, 5)]
    answer = rng.choice(posts) if liked_answers else max(posts, key=lambda p: p.similarity or 0)
    posts = [PostFeatures(post_id=p.post_id, post_number=p.post_number,
                          similarity=p.similarity, likes=40 if p is answer else p.likes)
             for p in posts]
    return Labelled(LinkLabel("q", i, frozenset({answer.post_id}), "qrels"), posts)


def test_a_rule_that_links_better_on_held_out_labels_is_served() -> None:
    rng = random.Random(1)
    items = [topic(i, rng, liked_answers=True) for i in range(120)]
    rule, report = tune_links(items, resamples=500)
    assert report["served"] == "learned" and rule.source.startswith("learned on 120")
    assert report["held_out_hit"] > report["fixed_hit"] + 0.3
    assert report["difference"]["ci_low"] > 0
    assert rule.as_dict()["likes"] > 0
    assert choose(items[0].posts, rule=rule).order[0] in items[0].label.good


def test_the_fixed_rule_stays_when_learning_does_not_pay() -> None:
    rng = random.Random(2)
    items = [topic(i, rng, liked_answers=False) for i in range(60)]
    rule, report = tune_links(items, resamples=500)
    assert rule == ANSWER_RULE and report["served"] == "fixed"
    with pytest.raises(ValueError, match="at least"):
        tune_links(items[: MIN_LABELS - 1])

