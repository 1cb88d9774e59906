"""Request handling shared by the host's routes: input lists, limits, gathering results."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, TypeVar

from flask import Response

from models.errors import ModelInputError
from models.host.config import HostConfig
from models.host.engines import EmbedEngine, Kind
from models.host.errors import HostError, ModelCallFailed, invalid, too_large

R = TypeVar("R")


def json_response(data: Any, status: int = 200) -> Response:
    """Compact JSON (vectors make big bodies: no spaces)."""
    return Response(json.dumps(data, separators=(",", ":"), ensure_ascii=False), status=status,
                    mimetype="application/json")  # fmt: skip


def texts_of(inputs: str | list[str], config: HostConfig, what: str = "inputs") -> list[str]:
    """The inputs as a list, refused when empty, too many, or holding an empty text."""
    texts = [inputs] if isinstance(inputs, str) else inputs
    if not texts:
        raise invalid(f"`{what}` cannot be empty")
    if len(texts) > config.max_inputs:
        raise too_large(
            f"batch size {len(texts)} > maximum allowed batch size {config.max_inputs}"
        )
    for index, text in enumerate(texts):
        if not text.strip():
            raise invalid(f"`{what}[{index}]` is empty or whitespace only")
    return texts


def cap_chars(text: str, where: str, config: HostConfig, truncate: bool) -> str:
    """``text`` within ``max_input_chars``: cut when truncating, else refused (413)."""
    if len(text) <= config.max_input_chars:
        return text
    if truncate:
        # The tokenizer never sees more than this; the model's own limit is far smaller.
        return text[: config.max_input_chars]
    raise too_large(f"`{where}` has {len(text)} characters; the limit is "
                    f"{config.max_input_chars} (send truncate=true to cut it)")  # fmt: skip


def check_direction(direction: str) -> None:
    """Refuse left truncation, which this host does not implement (422)."""
    if direction.lower() != "right":
        raise invalid("only truncation_direction=Right is supported by this host")


def prompt_kind(prompt_name: str | None, engine: EmbedEngine) -> Kind:
    """The embedding kind TEI's ``prompt_name`` asks for."""
    # Without a prompt name the passage prompt applies: what the in-process embedder does.
    if prompt_name is None or prompt_name in ("passage", "document"):
        return "passage"
    if prompt_name == "query":
        return "query"
    raise invalid(f"unknown prompt_name {prompt_name!r}; this host knows: query, passage")


def gather(futures: Sequence[Future[R]], timeout: float) -> list[R]:
    """Results of a request's items; model failures become 424, a stuck model 503."""
    deadline = time.monotonic() + timeout
    results: list[R] = []
    try:
        for future in futures:
            results.append(future.result(max(0.0, deadline - time.monotonic())))
    except FutureTimeout:
        for future in futures:
            future.cancel()
        raise HostError(503, "unhealthy", f"no result within {timeout:.0f}s; the model is "
                        "stuck or overloaded") from None  # fmt: skip
    except ModelInputError as exc:
        raise invalid(str(exc)) from exc
    except HostError:
        raise
    except Exception as exc:
        raise ModelCallFailed(f"inference failed: {type(exc).__name__}: {exc}") from exc
    return results


def refuse_over_long(
    texts: list[str], tokens_over: Callable[[str], tuple[int, int] | None], message: str
) -> None:
    """With ``truncate: false``, an input over the model's maximum is a 413 (TEI's answer).

    ``tokens_over`` gives (tokens, maximum) for a text over the limit, else None; ``message``
    is formatted with the input's index ``i``, its token count ``n`` and the maximum ``m``.
    """
    for index, text in enumerate(texts):
        over = tokens_over(text)
        if over:
            raise too_large(message.format(i=index, n=over[0], m=over[1]))


