"""Request bodies of the TEI API, validated strictly (wrong types and unknown fields are 422)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

# TEI spells it "Right"/"Left"; we also take the lower-case forms. Only right truncation is
# implemented: a "Left" request is refused instead of being silently cut on the wrong side.
TruncationDirection = Literal["Right", "Left", "right", "left"]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class EmbedRequest(_Strict):
    """``POST /embed``."""

    inputs: str | list[str]
    normalize: bool = True
    truncate: bool | None = None
    truncation_direction: TruncationDirection = "Right"
    prompt_name: str | None = None


class RerankRequest(_Strict):
    """``POST /rerank``."""

    query: str
    texts: list[str]
    truncate: bool | None = None
    raw_scores: bool = False
    return_text: bool = False
    truncation_direction: TruncationDirection = "Right"


class TokenizeRequest(_Strict):
    """``POST /tokenize``."""

    inputs: str | list[str]
    add_special_tokens: bool = True
    prompt_name: str | None = None


class OpenAIEmbeddingRequest(_Strict):
    """``POST /v1/embeddings`` (OpenAI's embeddings API).

    ``input`` may also be token ids in OpenAI's API; they are typed here so that the route can
    refuse them with a clear message (ids of another tokenizer mean nothing to this model).
    """

    model: str
    input: str | list[str] | list[int] | list[list[int]]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None
    user: str | None = None
