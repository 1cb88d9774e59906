"""The one bearer-token parser of the sidecar API, its moderation API and the model host."""

from __future__ import annotations

import pytest

from models.web.auth import bearer_token, token_matches


@pytest.mark.parametrize("header", ["Bearer k-1", "bearer k-1", "BEARER k-1", "BeArEr  k-1 ",
                                    " Bearer k-1"])
def test_the_scheme_is_case_insensitive(header: str) -> None:
    # RFC 7235 §2.1: the auth-scheme is a case-insensitive token.
    assert bearer_token(header) == "k-1"


@pytest.mark.parametrize("header", [None, "", "k-1", "Basic k-1", "Bearer", "Bearer   ",
                                    "Bearerk-1", "Token k-1"])
def test_anything_else_carries_no_token(header: str | None) -> None:
    assert bearer_token(header) is None


def test_tokens_match_exactly() -> None:
    assert token_matches("s3cret", "s3cret") and token_matches("s3cret", b"s3cret")
    for wrong in ("s3cre", "s3crets", "S3CRET", "", None):
        assert not token_matches(wrong, "s3cret"), wrong
    # No key configured: nothing matches, not even an empty token.
    assert not token_matches("", "") and not token_matches("x", b"")
