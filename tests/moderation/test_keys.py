"""Keys that resist guessing: a throttle on SIDECAR_API_KEY, minimum lengths, the scheme.

The API key gets the same failure counting as the moderator key
(sidecar/moderation/throttle.py): wrong keys from one client are answered 429 past the limit,
the right key never is. Both keys, and
the model host's, need ``MIN_KEY_CHARS`` characters. ``X-Forwarded-Proto`` counts only through
the proxies ``SIDECAR_PROXY_HOPS`` trusts.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from sidecar.config.settings import MIN_KEY_CHARS, Settings
from sidecar.moderation.auth import SESSION_COOKIE
from sidecar.moderation.throttle import MAX_FAILURES, client_bucket
from tests.conftest import API_KEY
from tests.moderation.conftest import MODERATOR_KEY

CLIENT = "203.0.113.9"


def _app(mod_state: Any, **settings: Any) -> Any:
    from sidecar.api.app import create_app

    updated = mod_state.settings.model_copy(update=settings)
    return create_app(updated, dataclasses.replace(mod_state, settings=updated))


def _get(client: Any, key: str | None, ip: str = CLIENT) -> Any:
    headers = {"X-Forwarded-For": ip}
    if key is not None:
        headers["Authorization"] = f"Bearer {key}"
    return client.get("/v1/openapi.json", headers=headers)


def test_wrong_api_keys_are_throttled_the_right_one_never(mod_state: Any) -> None:
    http = _app(mod_state, proxy_hops=1).test_client()
    codes = [_get(http, f"guess-{i}").status_code for i in range(MAX_FAILURES + 1)]
    assert codes == [401] * MAX_FAILURES + [429]
    throttled = _get(http, "one more guess")
    assert throttled.status_code == 429
    assert throttled.json["error"]["code"] == "too_many_requests"
    assert _get(http, API_KEY).status_code == 200  # the key's holder, from the same address
    assert _get(http, "elsewhere", ip="198.51.100.20").status_code == 401  # another client


def test_requests_without_a_key_are_not_guesses(mod_state: Any) -> None:
    http = _app(mod_state, proxy_hops=1).test_client()
    assert {_get(http, None).status_code for _ in range(MAX_FAILURES + 5)} == {401}


def test_bearer_routes_document_the_429(mod_state: Any) -> None:
    spec = _get(_app(mod_state).test_client(), API_KEY).json
    search = spec["paths"]["/v1/search"]["post"]["responses"]
    assert {"401", "429"} <= set(search)
    assert "429" not in spec["paths"]["/v1/health"]["get"]["responses"]


def test_client_buckets() -> None:
    assert client_bucket("2001:db8:1:2:aaaa:bbbb:cccc:dddd") == "2001:db8:1:2::/64"
    assert client_bucket("2001:db8:1:2::1") == client_bucket("2001:db8:1:2:ffff::")
    assert client_bucket("::ffff:192.0.2.7") == "192.0.2.7"
    assert client_bucket("192.0.2.7") == "192.0.2.7"
    assert client_bucket(None) == "unknown" and client_bucket("not-an-ip") == "not-an-ip"


@pytest.mark.parametrize("name", ["api_key", "moderator_key", "model_host_api_key"])
def test_short_keys_are_refused(name: str) -> None:
    with pytest.raises(ValidationError, match=f"at least {MIN_KEY_CHARS} characters"):
        Settings(**{name: SecretStr("k" * (MIN_KEY_CHARS - 1))})
    assert getattr(Settings(**{name: SecretStr("k" * MIN_KEY_CHARS)}), name) is not None


def test_the_moderator_key_is_not_the_api_key() -> None:
    with pytest.raises(ValidationError, match="must differ"):
        Settings(api_key=SecretStr(API_KEY), moderator_key=SecretStr(API_KEY))


def _login(client: Any, **headers: str) -> Any:
    return client.post("/moderation/login", data={"key": MODERATOR_KEY, "next": ""},
                       headers=headers)


def _secure(response: Any) -> bool:
    cookie = next(c for c in response.headers.getlist("Set-Cookie")
                  if c.startswith(SESSION_COOKIE))
    return "Secure" in cookie


def test_forwarded_proto_counts_only_through_trusted_proxies(mod_state: Any) -> None:
    from sidecar.api.gunicorn_config import api_options, model_host_options

    direct = _app(mod_state, proxy_hops=0).test_client()
    assert not _secure(_login(direct, **{"X-Forwarded-Proto": "https"}))
    proxied = _app(mod_state, proxy_hops=1).test_client()
    assert _secure(_login(proxied, **{"X-Forwarded-Proto": "https",
                                      "X-Forwarded-For": CLIENT}))
    # gunicorn itself believes the header only from the proxies there are.
    assert api_options(Settings())["forwarded_allow_ips"] == ""
    assert model_host_options(Settings())["forwarded_allow_ips"] == ""
    assert api_options(Settings(proxy_hops=1))["forwarded_allow_ips"] == "127.0.0.1,::1"
