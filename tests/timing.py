"""Growth checks that cannot flake on a busy machine: a ratio of two sizes in one run.

A linear scan on 4x the input takes about 4x the time; a quadratic one 16x, a cubic one 64x.
Each size is timed several times and the best run kept (noise only ever adds time), so the
ratio stays near 4 on a loaded machine and the bound (8x) sits far from both sides.
"""

from __future__ import annotations

import time
from collections.abc import Callable

GROWTH_BOUND = 8.0


def best_time(fn: Callable[[], object], repeats: int) -> float:
    """The fastest of ``repeats`` calls, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def growth(fn: Callable[[str], object], make: Callable[[int], str], n: int,
           repeats: int = 5, attempts: int = 3) -> float:
    """How much longer ``fn`` takes on ``make(4 * n)`` than on ``make(n)``.

    The smallest ratio of up to ``attempts`` measurements: a burst of load on the other core
    during one measurement inflates it, while a super-linear scan is slow on every attempt.
    """
    small, large = make(n), make(4 * n)
    fn(small)  # warm caches (compiled patterns, imports)
    ratio = float("inf")
    for _ in range(attempts):
        t_small = best_time(lambda: fn(small), repeats)
        t_large = best_time(lambda: fn(large), max(2, repeats // 2))
        ratio = min(ratio, t_large / max(t_small, 1e-6))
        if ratio < GROWTH_BOUND:
            break
    return ratio


def relative_cost(fn: Callable[[str], object], text: str, baseline: str,
                  repeats: int = 2) -> float:
    """How much longer ``fn`` takes on ``text`` than on ``baseline`` (e.g. prose, same length)."""
    fn(baseline)
    t_base = best_time(lambda: fn(baseline), repeats)
    t_text = best_time(lambda: fn(text), repeats)
    return t_text / max(t_base, 1e-6)
