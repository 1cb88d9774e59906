"""Invariants of the length-aware batch planner."""

from __future__ import annotations

import numpy as np
import pytest

from models.batching import plan_batches


def _check_plan(lengths: list[int], batches: list[list[int]], tokens: int, size: int) -> None:
    flat = [i for batch in batches for i in batch]
    assert sorted(flat) == list(range(len(lengths))), "every index exactly once"
    for batch in batches:
        assert 1 <= len(batch) <= size
        widest = max(lengths[i] for i in batch)
        if len(batch) > 1:
            assert len(batch) * widest <= tokens, "padded tokens within the cap"
        # Items of one batch are contiguous in length order: no batch spans another's lengths.
        assert [lengths[i] for i in batch] == sorted((lengths[i] for i in batch), reverse=True)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize(("tokens", "size"), [(16384, 32), (1000, 8), (64, 100), (1, 4)])
def test_plan_invariants_on_random_lengths(seed: int, tokens: int, size: int) -> None:
    rng = np.random.default_rng(seed)
    lengths = [int(x) for x in rng.integers(1, 600, size=int(rng.integers(1, 300)))]
    batches = plan_batches(lengths, max_batch_tokens=tokens, max_batch_size=size)
    _check_plan(lengths, batches, tokens, size)


def test_batches_are_sorted_longest_first_and_low_padding() -> None:
    lengths = [5, 100, 6, 99, 7, 98]
    batches = plan_batches(lengths, max_batch_tokens=300, max_batch_size=3)
    assert batches == [[1, 3, 5], [4, 2, 0]]


def test_equal_lengths_keep_input_order() -> None:
    assert plan_batches([4, 4, 4, 4], max_batch_size=2) == [[0, 1], [2, 3]]


def test_oversized_item_gets_its_own_batch() -> None:
    lengths = [10, 5000, 10]
    batches = plan_batches(lengths, max_batch_tokens=100, max_batch_size=32)
    assert batches[0] == [1]
    _check_plan(lengths, batches, 100, 32)


def test_attention_cap_splits_long_sequences() -> None:
    lengths = [512] * 8
    capped = plan_batches(lengths, max_batch_tokens=10**9, max_attention_cells=2 * 512 * 512)
    assert all(len(b) <= 2 for b in capped)
    assert len(plan_batches(lengths, max_batch_tokens=10**9)) == 1


def test_empty_input_gives_no_batches() -> None:
    assert plan_batches([]) == []


@pytest.mark.parametrize(
    "kwargs", [{"max_batch_tokens": 0}, {"max_batch_size": 0}, {"max_attention_cells": 0}]
)
def test_invalid_caps_are_rejected(kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError):
        plan_batches([1, 2], **kwargs)
