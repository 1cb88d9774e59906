"""Length-aware batch planning.

Transformer cost grows with the *padded* batch (batch size x longest sequence), and attention
memory with batch x length². Sorting by length before cutting batches keeps padding small and
makes throughput predictable. The planner is pure: it returns index batches, and the caller
scatters results back to the input order.
"""

from __future__ import annotations

from collections.abc import Sequence

DEFAULT_MAX_BATCH_TOKENS = 16384
DEFAULT_MAX_BATCH_SIZE = 32


def plan_batches(
    lengths: Sequence[int],
    max_batch_tokens: int = DEFAULT_MAX_BATCH_TOKENS,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    max_attention_cells: int | None = None,
) -> list[list[int]]:
    """Group item indices into batches of similar length.

    Items are visited longest first (so the most memory-hungry batch runs first and a memory
    problem shows up immediately), with a stable order among equal lengths. A batch is closed
    when adding the next item would exceed any cap:

    * ``len(batch) <= max_batch_size``;
    * ``len(batch) * max_len <= max_batch_tokens`` (padded tokens);
    * ``len(batch) * max_len**2 <= max_attention_cells`` when given (attention-score memory,
      which dominates for long sequences).

    An item that alone exceeds a cap still gets a batch of its own: it is never dropped.
    Returns a list of index lists covering every index exactly once.
    """
    if max_batch_tokens < 1:
        raise ValueError(f"max_batch_tokens must be >= 1, got {max_batch_tokens}")
    if max_batch_size < 1:
        raise ValueError(f"max_batch_size must be >= 1, got {max_batch_size}")
    if max_attention_cells is not None and max_attention_cells < 1:
        raise ValueError(f"max_attention_cells must be >= 1, got {max_attention_cells}")
    if any(n < 0 for n in lengths):
        raise ValueError("lengths must be non-negative")

    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])  # sorted() is stable
    batches: list[list[int]] = []
    current: list[int] = []
    longest = 0
    for index in order:
        # Visiting longest first, the first item of a batch fixes its padded length.
        width = longest if current else max(lengths[index], 1)
        size = len(current) + 1
        fits = (
            size <= max_batch_size
            and size * width <= max_batch_tokens
            and (max_attention_cells is None or size * width * width <= max_attention_cells)
        )
        if current and not fits:
            batches.append(current)
            current = []
            width = max(lengths[index], 1)
        if not current:
            longest = width
        current.append(index)
    if current:
        batches.append(current)
    return batches
