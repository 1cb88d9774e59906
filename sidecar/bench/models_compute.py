"""Helpers of the models benchmark: texts of a fixed token length, FLOP counts, the GEMM peak.

Speed is reported as texts/s and tokens/s, and also as effective GFLOP/s: the matrix-multiply
work of the encoder (QKV, attention output, FFN projections and the two attention products,
counted on real tokens, padding excluded) divided by wall time. Set against the machine's own
fp32 GEMM rate, measured by numpy/BLAS in the same run, it says how close to the hardware limit
a runtime gets.
"""

from __future__ import annotations

import contextlib
import json
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import resources as pkg_resources
from typing import Any

import numpy as np

from models.tokenization import TextTokenizer


@dataclass(frozen=True)
class EncoderShape:
    """What the FLOP count needs from a BERT-style encoder config."""

    layers: int
    hidden: int
    intermediate: int

    @classmethod
    def from_config(cls, config: dict[str, Any]) -> EncoderShape:
        return cls(int(config["num_hidden_layers"]), int(config["hidden_size"]),
                   int(config["intermediate_size"]))  # fmt: skip


def encoder_flops(shape: EncoderShape, lengths: Sequence[int]) -> float:
    """Matmul FLOPs (2 per multiply-add) of one forward pass over sequences of ``lengths``.

    Per layer and token: Q, K, V and output projections ``8 H²``, FFN ``4 H I``; per layer and
    sequence: scores ``Q Kᵀ`` and ``softmax · V`` ``4 L² H``. Embeddings, LayerNorm, GELU,
    softmax and pooling are left out (they are not matmuls and are small).
    """
    h, i = shape.hidden, shape.intermediate
    per_token = 8 * h * h + 4 * h * i
    return float(sum(shape.layers * (n * per_token + 4 * n * n * h) for n in lengths))


def gemm_gflops(threads: int, size: int = 2048, repeats: int = 3) -> float:
    """The machine's fp32 matrix-multiply rate (GFLOP/s, best of ``repeats``) via numpy/BLAS.

    BLAS is limited to ``threads`` with threadpoolctl when it is installed (it comes with the
    ``export`` extra); without it BLAS uses its own default, usually every core.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        limit: Any = contextlib.nullcontext()
    else:
        limit = threadpool_limits(limits=threads)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((size, size), dtype=np.float32)
    b = rng.standard_normal((size, size), dtype=np.float32)
    best = float("inf")
    with limit:
        a @ b  # warm-up: thread pool start, page faults
        for _ in range(repeats):
            start = time.perf_counter()
            a @ b
            best = min(best, time.perf_counter() - start)
    return 2.0 * size**3 / best / 1e9


def median_time(
    runs: dict[str, Callable[[], Any]], repeats: int
) -> tuple[dict[str, float], dict[str, Any]]:
    """Median wall time of each callable, runs interleaved round-robin; plus the last outputs.

    Interleaving spreads slow phases of a shared machine (another process, thermal limits) over
    every variant instead of penalising whichever ran during them.
    """
    times: dict[str, list[float]] = {name: [] for name in runs}
    outputs: dict[str, Any] = {}
    for name, run in runs.items():  # warm-up: allocations, lazy initialisation, caches
        outputs[name] = run()
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            outputs[name] = run()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}, outputs


def demo_corpus() -> tuple[list[str], list[str]]:
    """Post bodies and topic titles of the bundled demo forum (French and English)."""
    folder = pkg_resources.files("sidecar") / "demo"
    posts = [json.loads(line)["raw"] for line in
             (folder / "posts.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    titles = [json.loads(line)["title"] for line in
              (folder / "topics.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]
    return [p for p in posts if p.strip()], titles  # fmt: skip


def texts_of_length(tokenizer: TextTokenizer, count: int, content_tokens: int) -> list[str]:
    """``count`` different texts of exactly ``content_tokens`` tokens (specials not counted).

    Each starts at a different demo post and runs on through the following ones, cut at a token
    boundary, so the set mixes languages, Markdown, code and prose like real forum posts.
    """
    posts, _ = demo_corpus()
    texts = []
    for index in range(count):
        # Later passes over the posts skip a few words, so that no two texts are equal.
        skip, chunk, end = (index // len(posts)) * 7, "", index % len(posts)
        while True:
            chunk += posts[end % len(posts)] + "\n\n"
            end += 1
            candidate = " ".join(chunk.split(" ")[skip:])
            if tokenizer.count_tokens(candidate) >= content_tokens + 8:
                break
        texts.append(tokenizer.truncate_text(candidate, content_tokens))
    return texts


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity of two matrices."""
    a = a / np.linalg.norm(a, axis=1, keepdims=True)
    b = b / np.linalg.norm(b, axis=1, keepdims=True)
    return np.sum(a * b, axis=1)
