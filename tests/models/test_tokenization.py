"""Truncation, pair encoding and padding rules of TextTokenizer."""

from __future__ import annotations

import numpy as np
import pytest

from models.presets import minilm_dir
from models.tokenization import TextTokenizer, pad_batch

from .conftest import VARIED_TEXTS


@pytest.fixture(scope="module")
def tok() -> TextTokenizer:
    return TextTokenizer.from_dir(minilm_dir(), max_length=32)


def test_pad_id_and_special_tokens(tok: TextTokenizer) -> None:
    ids = tok.encode_batch(["hello"])[0]
    assert tok.pad_id not in ids
    assert len(ids) == tok.count_tokens("hello") + (tok.max_length - tok.max_content_tokens)


def test_encode_batch_truncates_including_special_tokens(tok: TextTokenizer) -> None:
    long_text = "word " * 200
    short = tok.encode_batch(["short text", long_text])
    assert len(short[1]) == tok.max_length
    # The special tokens survive truncation: the sequence still ends with the same token.
    assert short[1][-1] == short[0][-1]


@pytest.mark.parametrize("text", VARIED_TEXTS)
@pytest.mark.parametrize("limit", [0, 1, 3, 10, 50])
def test_truncate_text_is_a_fitting_prefix_that_round_trips(
    tok: TextTokenizer, text: str, limit: int
) -> None:
    cut = tok.truncate_text(text, limit)
    assert text.startswith(cut)
    assert tok.count_tokens(cut) <= limit
    assert tok.truncate_text(cut, limit) == cut
    if tok.count_tokens(text) <= limit:
        assert cut == text
    else:
        # Maximal: the kept tokens are exactly the first tokens of the full text.
        full = tok.encode_batch([text])[0][1:-1]
        assert tok.encode_batch([cut])[0][1:-1] == full[: tok.count_tokens(cut)]
        assert tok.count_tokens(cut) >= limit - 1


def test_truncate_text_rejects_negative_limit(tok: TextTokenizer) -> None:
    with pytest.raises(ValueError):
        tok.truncate_text("text", -1)


def test_pairs_truncate_the_passage_not_the_query(tok: TextTokenizer) -> None:
    query = "how do I reset my password"
    passages = ["short answer", "a very long passage " * 50]
    pairs = tok.encode_pairs(query, passages)
    query_ids = tok.encode_batch([query])[0][1:-1]
    for ids, types in pairs:
        assert len(ids) <= tok.max_length
        assert len(types) == len(ids)
        assert ids[1 : 1 + len(query_ids)] == query_ids
        # Token types: 0 over [CLS] query [SEP], 1 over the passage.
        assert set(types[: len(query_ids) + 2]) == {0}
        assert set(types[len(query_ids) + 2 :]) == {1}
    assert len(pairs[1][0]) == tok.max_length


def test_overlong_query_is_cut_but_passage_keeps_room(tok: TextTokenizer) -> None:
    pairs = tok.encode_pairs("query word " * 100, ["the passage"])
    ids, types = pairs[0]
    assert len(ids) <= tok.max_length
    assert sum(types) >= 2  # passage tokens and its [SEP] are still there


def test_query_takes_at_most_half_the_pair_budget(tok: TextTokenizer) -> None:
    budget = tok.max_length - 3  # [CLS] query [SEP] passage [SEP]
    long_query = "why does my backup fail every night " * 20
    _ids, types = tok.encode_pairs(long_query, ["the passage " * 200])[0]
    query_tokens = types.count(0) - 2
    assert query_tokens == budget // 2
    assert types.count(1) - 1 == budget - budget // 2  # the passage fills the rest


def test_pad_batch_right_pads_with_mask() -> None:
    batch = pad_batch([[5, 6, 7], [8]], pad_id=0, type_ids=[[0, 0, 1], [0]])
    assert batch.input_ids.tolist() == [[5, 6, 7], [8, 0, 0]]
    assert batch.attention_mask.tolist() == [[1, 1, 1], [1, 0, 0]]
    assert batch.token_type_ids.tolist() == [[0, 0, 1], [0, 0, 0]]
    assert batch.input_ids.dtype == np.int64
