"""Tokenisation around a Hugging Face ``tokenizer.json``.

Truncation is done here (special tokens included in ``max_length``); padding is done per batch
by :func:`pad_batch`, never by the tokenizer, so each batch is only as wide as its longest item.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt
from tokenizers import Encoding, Tokenizer

from models.errors import ModelLoadError

TOKENIZER_FILE = "tokenizer.json"
_PAD_TOKENS = ("[PAD]", "<pad>", "<|padding|>", "<unk>")


@dataclass(frozen=True)
class TokenInfo:
    """One token as TEI's ``/tokenize`` describes it (character offsets, none for specials)."""

    id: int
    text: str
    special: bool
    start: int | None
    stop: int | None


@dataclass(frozen=True)
class PaddedBatch:
    """A right-padded batch ready for ONNX Runtime (all arrays int64, shape ``(batch, seq)``)."""

    input_ids: npt.NDArray[np.int64]
    attention_mask: npt.NDArray[np.int64]
    token_type_ids: npt.NDArray[np.int64]


def pad_batch(
    sequences: Sequence[Sequence[int]],
    pad_id: int,
    type_ids: Sequence[Sequence[int]] | None = None,
) -> PaddedBatch:
    """Right-pad token id lists to the longest one; padding gets ``pad_id`` and mask 0."""
    if not sequences:
        raise ValueError("cannot pad an empty batch")
    width = max(len(s) for s in sequences)
    ids = np.full((len(sequences), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(sequences), width), dtype=np.int64)
    types = np.zeros((len(sequences), width), dtype=np.int64)
    for row, seq in enumerate(sequences):
        ids[row, : len(seq)] = seq
        mask[row, : len(seq)] = 1
        if type_ids is not None:
            types[row, : len(seq)] = type_ids[row]
    return PaddedBatch(input_ids=ids, attention_mask=mask, token_type_ids=types)


class TextTokenizer:
    """A ``tokenizers.Tokenizer`` with our truncation rules and the model's pad id."""

    def __init__(self, tokenizer_path: str | Path, max_length: int) -> None:
        path = Path(tokenizer_path)
        try:
            plain = Tokenizer.from_file(str(path))
        except Exception as exc:  # the Rust side raises plain Exception
            raise ModelLoadError(path, f"cannot read tokenizer: {exc}") from exc
        # The pad id must be read before padding is disabled: tokenizer.json stores it there.
        padding = plain.padding
        self.pad_id: int = int(padding["pad_id"]) if padding else self._guess_pad_id(plain)
        plain.no_padding()
        plain.no_truncation()
        self.max_length = max_length
        self._plain = plain
        self._specials_single = plain.num_special_tokens_to_add(False)
        self._specials_pair = plain.num_special_tokens_to_add(True)
        if max_length <= self._specials_pair:
            raise ModelLoadError(path, f"max_length {max_length} leaves no room for text")
        # A second instance with truncation switched on lets the Rust side truncate whole
        # batches (accounting for special tokens) without a Python loop per text.
        truncating = Tokenizer.from_str(plain.to_str())
        truncating.enable_truncation(max_length)
        self._truncating = truncating

    @classmethod
    def from_dir(cls, model_dir: str | Path, max_length: int) -> TextTokenizer:
        """Load ``tokenizer.json`` from a model directory."""
        path = Path(model_dir) / TOKENIZER_FILE
        if not path.is_file():
            raise ModelLoadError(path, "tokenizer.json not found")
        return cls(path, max_length)

    @staticmethod
    def _guess_pad_id(tokenizer: Tokenizer) -> int:
        for token in _PAD_TOKENS:
            token_id = tokenizer.token_to_id(token)
            if token_id is not None:
                return int(token_id)
        return 0

    @property
    def vocab_size(self) -> int:
        """Vocabulary size, added tokens included."""
        return int(self._plain.get_vocab_size(with_added_tokens=True))

    @property
    def max_content_tokens(self) -> int:
        """Tokens of text that fit in one single-sequence input (``max_length`` minus specials)."""
        return self.max_length - self._specials_single

    @property
    def max_pair_content_tokens(self) -> int:
        """Tokens of query + passage that fit in one pair input (``max_length`` minus specials)."""
        return self.max_length - self._specials_pair

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        """Token ids (with special tokens) of each text, truncated to ``max_length``."""
        return [enc.ids for enc in self._truncating.encode_batch(list(texts))]

    def encode_pairs(
        self, query: str, passages: Sequence[str]
    ) -> list[tuple[list[int], list[int]]]:
        """``(input_ids, token_type_ids)`` of each (query, passage) pair, for cross-encoders.

        The passage is truncated first; the query takes at most half of the budget, so every
        pair shows at least as much passage as question (a long question on a short model, the
        forum's own reranker at 160 tokens, would otherwise crowd the post out).
        """
        budget = self.max_length - self._specials_pair
        query_enc = self._plain.encode(query, add_special_tokens=False)
        if len(query_enc.ids) > budget // 2:
            query_enc.truncate(budget // 2)
        room = budget - len(query_enc.ids)
        pairs: list[tuple[list[int], list[int]]] = []
        for passage_enc in self._plain.encode_batch(list(passages), add_special_tokens=False):
            if len(passage_enc.ids) > room:
                passage_enc.truncate(room)
            merged: Encoding = self._plain.post_process(query_enc, passage_enc, True)
            pairs.append((merged.ids, merged.type_ids))
        return pairs

    def describe(self, text: str, add_special_tokens: bool = True) -> list[TokenInfo]:
        """Every token of ``text`` (no truncation) with its character span in ``text``."""
        encoding = self._plain.encode(text, add_special_tokens=add_special_tokens)
        tokens: list[TokenInfo] = []
        for token_id, token, (start, stop), special in zip(
            encoding.ids, encoding.tokens, encoding.offsets, encoding.special_tokens_mask,
            strict=True,
        ):
            if special:
                tokens.append(TokenInfo(token_id, token, True, None, None))
            else:
                tokens.append(TokenInfo(token_id, text[start:stop], False, start, stop))
        return tokens

    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` without special tokens and without truncation."""
        return len(self._plain.encode(text, add_special_tokens=False).ids)

    def truncate_text(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` (an exact substring) that fits in ``max_tokens`` tokens.

        The cut is made at a token boundary using the tokenizer's character offsets, so the
        returned text is exactly what the model sees after truncation: hashing it identifies the
        embedded content. Returns ``text`` itself when it already fits.
        """
        if max_tokens < 0:
            raise ValueError(f"max_tokens must be >= 0, got {max_tokens}")
        encoding = self._plain.encode(text, add_special_tokens=False)
        if len(encoding.ids) <= max_tokens:
            return text
        offsets = encoding.offsets
        keep = max_tokens
        while keep > 0:
            end = max(stop for _, stop in offsets[:keep])
            prefix = text[:end]
            # Unigram/BPE tokenisations are not always prefix-stable: re-count and back off one
            # token at a time until the prefix really fits.
            if self.count_tokens(prefix) <= max_tokens:
                return prefix
            keep -= 1
        return ""
