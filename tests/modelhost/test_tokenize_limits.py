"""`/tokenize` under load: the limits of the other routes hold for it too.

Every token costs about 60 bytes of JSON and a few Python objects, so without limits one 100 KB
input gave 50,002 tokens and 3.2 MB of JSON, and a body of the host's 16 MB would take
gigabytes. Oversized requests must be answered 413 or 429 without being tokenized, and a
request the host accepts must cost no more memory than the largest `/embed` request it accepts.
Memory is Python's (tracemalloc) on the request thread, through Flask's test client.
"""

from __future__ import annotations

import json
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from models import OnnxEmbedder
from models.tokenization import TextTokenizer
from tests.modelhost.conftest import make_app

# Small limits, so that the requests the host refuses are cheap to build: a text of
# MAX_CHARS characters at most, a body of BODY_BYTES at most, two maximal /tokenize at once.
MAX_CHARS = 20_000
BODY_BYTES = 2 * 1024 * 1024
LIMITS = {"max_input_chars": MAX_CHARS, "max_request_bytes": BODY_BYTES, "max_inputs": 128,
          "tokenize_slots": 2}
# The worst text for /tokenize: every character a token of its own ("!" is one WordPiece token).
DENSE = "! " * (MAX_CHARS // 2)


@pytest.fixture
def host(minilm: OnnxEmbedder) -> Iterator[Any]:
    app = make_app(minilm, **LIMITS)
    yield app
    from models.host import close_host_app

    close_host_app(app)


def peak_of(call: Callable[[], Any]) -> tuple[Any, int]:
    """The call's result and the peak of Python memory allocated while it ran."""
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        result = call()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return result, peak


def test_a_body_over_the_limit_is_refused_before_it_is_read(host: Any) -> None:
    body = json.dumps({"inputs": [DENSE] * 100}).encode()  # 2 MB: what the body limit allows
    assert len(body) < BODY_BYTES
    client = host.test_client()
    resp, peak = peak_of(lambda: client.post("/tokenize", data=body,
                                             content_type="application/json"))
    assert resp.status_code == 413, resp.get_data(as_text=True)[:200]
    assert resp.json["error_type"] == "validation"
    assert peak < len(body) // 4  # never read, never parsed, never tokenized


def test_the_inputs_of_a_request_are_capped_together(host: Any) -> None:
    client = host.test_client()
    half = "word " * (MAX_CHARS // 10)  # MAX_CHARS / 2 characters
    too_many = client.post("/tokenize", json={"inputs": [half, half, "one more"]})
    assert too_many.status_code == 413
    assert f"at most {MAX_CHARS} characters per request" in too_many.json["error"]
    fits = client.post("/tokenize", json={"inputs": [half, half[:-10]]})
    assert fits.status_code == 200 and len(fits.json) == 2
    one = client.post("/tokenize", json={"inputs": "x" * (MAX_CHARS + 1)})
    assert one.status_code == 413  # a single text over the limit, as before


def test_a_maximal_tokenize_costs_no_more_than_a_maximal_embed(host: Any) -> None:
    client = host.test_client()
    # The largest /embed the host accepts: a body at its limit, texts cut at MAX_CHARS.
    texts = ["alpha beta " * (MAX_CHARS // 11)] * (BODY_BYTES // (MAX_CHARS + 8) - 1)
    embed, embed_peak = peak_of(lambda: client.post(
        "/embed", json={"inputs": texts, "truncate": True}))
    assert embed.status_code == 200, embed.json
    # The largest /tokenize it accepts: MAX_CHARS characters, one token each.
    tokens, tokenize_peak = peak_of(lambda: client.post("/tokenize", json={"inputs": DENSE}))
    assert tokens.status_code == 200 and len(tokens.json[0]) >= MAX_CHARS // 2
    assert tokenize_peak <= embed_peak, (tokenize_peak, embed_peak)


def test_concurrent_tokenize_requests_get_429_past_the_budget(
    host: Any, minilm: OnnxEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two maximal requests hold the budget (their tokenizer call is held on a gate): every
    other request at that moment is answered 429 at once, and all pass once they are done."""
    gate, entered = threading.Event(), threading.Semaphore(0)
    describe = TextTokenizer.describe

    def held(self: TextTokenizer, text: str, add_special_tokens: bool = True) -> Any:
        entered.release()
        assert gate.wait(30)
        return describe(self, text, add_special_tokens)

    monkeypatch.setattr(TextTokenizer, "describe", held)
    body = {"inputs": "word " * (MAX_CHARS // 5)}

    def post() -> int:
        return int(host.test_client().post("/tokenize", json=body).status_code)

    with ThreadPoolExecutor(2) as pool:
        holders = [pool.submit(post) for _ in range(2)]
        for _ in range(2):
            assert entered.acquire(timeout=30)
        state = host.extensions["model_host"]
        assert state.tokenize_budget.used == 2 * MAX_CHARS
        refused = [host.test_client().post("/tokenize", json=body) for _ in range(5)]
        assert {r.status_code for r in refused} == {429}
        assert refused[0].json["error_type"] == "overloaded"
        small = host.test_client().post("/tokenize", json={"inputs": "hi"})
        assert small.status_code == 429  # the budget is spent, whatever the size
        gate.set()
        assert [h.result(30) for h in holders] == [200, 200]
    assert state.tokenize_budget.used == 0
    assert post() == 200
