"""``POST /tokenize`` within limits, like the routes that go through the batcher.

Every token becomes about 60 bytes of JSON and a few Python objects, so the route is bounded by
characters, not only by inputs: a request holds at most ``max_input_chars`` characters in all
(413 beyond; the body limit is set from it, so an oversized body is refused before it is read),
and the characters being tokenized by all requests together are capped at ``tokenize_slots``
times that (429 beyond, as a full batcher queue answers). The answer is written token by token,
without a dictionary per token.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from models.host.batcher import Overloaded
from models.host.config import HostConfig
from models.host.errors import too_large
from models.tokenization import TextTokenizer, TokenInfo

# The most bytes one character takes in a JSON body: an astral character escaped as a surrogate
# pair (\\ud83d\\ude00); the slack holds the rest of the body.
_BYTES_PER_CHAR = 12
_BODY_SLACK = 4096


def body_limit(config: HostConfig) -> int:
    """The largest ``/tokenize`` body worth reading: ``max_input_chars`` characters, escaped."""
    return min(config.max_request_bytes, _BYTES_PER_CHAR * config.max_input_chars + _BODY_SLACK)


def check_size(texts: Sequence[str], prefix: str, config: HostConfig) -> int:
    """The characters a request asks to tokenize; 413 over ``max_input_chars``."""
    total = sum(len(prefix) + len(text) for text in texts)
    if total > config.max_input_chars:
        raise too_large(f"/tokenize takes at most {config.max_input_chars} characters per "
                        f"request; this one has {total} (send the inputs in several requests)")
    return total


class CharBudget:
    """Characters being tokenized now, across request threads; over ``capacity``: 429."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._used = 0
        self._lock = threading.Lock()

    @property
    def used(self) -> int:
        """Characters held right now."""
        with self._lock:
            return self._used

    @contextmanager
    def hold(self, chars: int) -> Iterator[None]:
        """Hold ``chars`` of the budget for the block, or raise Overloaded at once."""
        with self._lock:
            if self._used + chars > self.capacity:
                raise Overloaded(f"tokenizer busy ({self._used} characters being tokenized, "
                                 f"limit {self.capacity}); retry later")
            self._used += chars
        try:
            yield
        finally:
            with self._lock:
                self._used -= chars


def _token_json(token: TokenInfo) -> str:
    text = json.dumps(token.text, ensure_ascii=False)
    special = "true" if token.special else "false"
    start = "null" if token.start is None else token.start
    stop = "null" if token.stop is None else token.stop
    return f'{{"id":{token.id},"text":{text},"special":{special},"start":{start},"stop":{stop}}}'


def tokens_json(tokenizer: TextTokenizer, texts: Sequence[str], prefix: str,
                add_special_tokens: bool) -> str:
    """TEI's answer: for each text, its tokens with their character spans."""
    rows = []
    for text in texts:
        tokens = tokenizer.describe(prefix + text, add_special_tokens)
        rows.append("[" + ",".join(_token_json(t) for t in tokens) + "]")
        del tokens
    return "[" + ",".join(rows) + "]"
