"""The promotion guard: promoted only when better held out, beyond chance."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence

from sidecar.training.guard import MIN_JUDGED, MIN_QUESTIONS, judge, reciprocal_ranks
from sidecar.training.mining import Pair


def pairs_of(questions: int, negatives: int = 3) -> list[Pair]:
    out = []
    for q in range(questions):
        out.append(Pair(f"q{q}", f"answer {q}", 1.0, 0.5, q, "positive"))
        out += [Pair(f"q{q}", f"other {q}.{n}", 0.0, 0.5, q, "hard") for n in range(negatives)]
    return out


def knows(pairs: Sequence[Pair]) -> list[float]:
    """A scorer that ranks every answer first."""
    return [p.label + 0.01 * i for i, p in enumerate(pairs)]


def guesses(pairs: Sequence[Pair]) -> list[float]:
    rng = random.Random(1)
    return [rng.random() for _ in pairs]


def test_reciprocal_rank_of_the_best_ranked_answer_ties_count_against_it() -> None:
    pairs = pairs_of(2, 2)
    assert reciprocal_ranks(pairs, [0.9, 0.1, 0.2, 0.5, 0.5, 0.1]) == [1.0, 0.5]


def test_a_clearly_better_reranker_is_promoted() -> None:
    pairs = pairs_of(60)
    verdict = judge(pairs, knows, guesses, served_name="bi-encoder:m", new_name="new",
                    resamples=300)
    assert verdict.promote
    assert verdict.figures["mrr"]["new"] == 1.0
    assert verdict.figures["mrr"]["ci"][0] > 0


def test_one_that_is_not_better_is_not() -> None:
    pairs = pairs_of(60)
    verdict = judge(pairs, guesses, knows, served_name="bi-encoder:m", new_name="new",
                    resamples=300)
    assert not verdict.promote
    assert "not promoted" in verdict.reason
    same = judge(pairs, knows, knows, served_name="bi-encoder:m", new_name="new", resamples=300)
    assert not same.promote


def test_too_few_held_out_questions_give_no_verdict() -> None:
    verdict = judge(pairs_of(MIN_QUESTIONS - 1), knows, guesses, served_name="s", new_name="n")
    assert not verdict.promote
    assert f"fewer than the {MIN_QUESTIONS}" in verdict.reason


def test_better_on_mined_questions_but_worse_on_judged_ones_is_not_promoted() -> None:
    mined = pairs_of(60)
    judged = [dataclasses.replace(p, topic_id=p.topic_id + 1000, judged=True)
              for p in pairs_of(MIN_JUDGED)]
    pairs = mined + judged

    def mined_only(ps: Sequence[Pair]) -> list[float]:
        """Knows the mined questions' answers, ranks the judged ones' last."""
        return [(p.label if not p.judged else 1.0 - p.label) + 0.01 * i
                for i, p in enumerate(ps)]

    verdict = judge(pairs, mined_only, guesses, served_name="s", new_name="n", resamples=300)
    assert not verdict.promote
    assert "questions the forum's people judged" in verdict.reason
    assert verdict.figures["judged_mrr"]["questions"] == MIN_JUDGED
    # The same model, judged on fewer than MIN_JUDGED of them: the mined ones decide.
    few = mined + judged[:4 * (MIN_JUDGED - 1)]
    assert judge(few, mined_only, guesses, served_name="s", new_name="n", resamples=300).promote
    # Better on both: promoted.
    assert judge(pairs, knows, guesses, served_name="s", new_name="n", resamples=300).promote
