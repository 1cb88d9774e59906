"""Keys that resist guessing: a throttle on SIDECAR_API_KEY, key strength, the scheme.

The API key gets the same failure counting as the moderator key
(sidecar/moderation/throttle.py): wrong keys from one client are answered 429 past the limit,
and past it the client's key is not compared at all, on every route that compares it
(``/v1/health`` included). Both keys, and the model host's, need ``MIN_KEY_CHARS`` characters
and an estimated strength (sidecar/config/keys.py) that generated keys pass and typed ones do
not. ``X-Forwarded-Proto`` counts only through the proxies ``SIDECAR_PROXY_HOPS`` trusts.
"""

from __future__ import annotations

import base64
import dataclasses
import secrets
import uuid
from typing import Any

import pytest
from pydantic import SecretStr, ValidationError

from sidecar.config.keys import MIN_KEY_BITS, key_bits
from sidecar.config.settings import MIN_KEY_CHARS, Settings
from sidecar.errors import ConfigurationError
from sidecar.moderation.auth import SESSION_COOKIE
from sidecar.moderation.throttle import MAX_FAILURES, client_bucket
from tests.conftest import API_KEY
from tests.moderation.conftest import MODERATOR_KEY
from tests.moderation.test_moderation_pages import login

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


def test_a_client_past_its_limit_is_refused_before_its_api_key_is_compared(
    mod_state: Any
) -> None:
    http = _app(mod_state, proxy_hops=1).test_client()
    codes = [_get(http, f"guess-{i}").status_code for i in range(MAX_FAILURES + 1)]
    assert codes == [401] * MAX_FAILURES + [429]
    throttled = _get(http, "one more guess")
    assert throttled.status_code == 429
    assert throttled.json["error"]["code"] == "too_many_requests"
    assert _get(http, API_KEY).status_code == 429  # a right guess gets nothing either
    assert _get(http, API_KEY, ip="198.51.100.20").status_code == 200  # another client
    assert _get(http, "elsewhere", ip="198.51.100.20").status_code == 401


def test_wrong_keys_on_health_count_too(mod_state: Any) -> None:
    """/v1/health answers without a key and says more with the right one: it used to compare
    any number of keys without counting them."""
    http = _app(mod_state, proxy_hops=1).test_client()
    for i in range(MAX_FAILURES):
        resp = http.get("/v1/health", headers={"Authorization": f"Bearer guess-{i}",
                                               "X-Forwarded-For": CLIENT})
        assert resp.status_code == 200 and resp.json == {"status": "ok"}
    right = http.get("/v1/health", headers={"Authorization": f"Bearer {API_KEY}",
                                            "X-Forwarded-For": CLIENT})
    assert right.json == {"status": "ok"}  # not compared: the client is past its limit
    assert _get(http, API_KEY).status_code == 429
    elsewhere = http.get("/v1/health", headers={"Authorization": f"Bearer {API_KEY}",
                                                "X-Forwarded-For": "198.51.100.20"})
    assert "version" in elsewhere.json


def test_addresses_that_are_not_ips_share_one_count(mod_state: Any) -> None:
    """Through a trusted proxy a client chooses what it appends to X-Forwarded-For before the
    proxy's entry... unless the proxy is misconfigured: a value that is not an IP address used
    to be a counter of its own, a fresh start per guess."""
    http = _app(mod_state, proxy_hops=1).test_client()
    codes = [_get(http, f"guess-{i}", ip=f"not-an-ip-{i}").status_code
             for i in range(MAX_FAILURES + 1)]
    assert codes == [401] * MAX_FAILURES + [429]
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
    assert client_bucket(None) == "unknown"
    assert client_bucket("not-an-ip") == client_bucket("also not one") == "invalid"


@pytest.mark.parametrize("name", ["api_key", "moderator_key", "model_host_api_key"])
def test_short_keys_are_refused(name: str) -> None:
    with pytest.raises(ValidationError, match=f"at least {MIN_KEY_CHARS} characters"):
        Settings(**{name: SecretStr(secrets.token_hex(16)[:MIN_KEY_CHARS - 1])})


WEAK_KEYS = ["k" * 40, "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "0123456789abcdefghijklmnop",
             "abcabcabcabcabcabcabcabcabc", "passwordpasswordpassword", "test-key-0123456789",
             "moderator-key-12345678", "SuperSecretModeratorPassword2024!",
             "changeme-changeme-changeme"]


@pytest.mark.parametrize("name", ["api_key", "moderator_key", "model_host_api_key"])
@pytest.mark.parametrize("key", WEAK_KEYS)
def test_long_but_weak_keys_are_refused(name: str, key: str) -> None:
    assert len(key) >= MIN_KEY_CHARS
    with pytest.raises(ValidationError, match="too easy to guess"):
        Settings(**{name: SecretStr(key)})


def test_generated_keys_always_pass() -> None:
    """What the docs and `make run` generate, 128 bits and more: every draw passes."""
    makers = {"openssl rand -hex 32": lambda: secrets.token_hex(32),
              "openssl rand -hex 16": lambda: secrets.token_hex(16),
              "openssl rand -base64 16": lambda: base64.b64encode(secrets.token_bytes(16)).decode(),
              "secrets.token_urlsafe(32) (sidecar run)": lambda: secrets.token_urlsafe(32),
              "uuid4": lambda: str(uuid.uuid4())}
    for name, make in makers.items():
        weakest = min(key_bits(make()) for _ in range(2000))
        assert weakest >= MIN_KEY_BITS, (name, weakest)
    assert Settings(api_key=SecretStr(API_KEY), moderator_key=SecretStr(MODERATOR_KEY))


def test_the_app_refuses_a_weak_key_given_past_the_settings(mod_state: Any) -> None:
    """Settings copied with another key skip pydantic's validators; the app checks again."""
    with pytest.raises(ConfigurationError, match="SIDECAR_MODERATOR_KEY: the key is too easy"):
        _app(mod_state, moderator_key=SecretStr("moderator-key-12345678"))


def test_the_moderator_key_is_not_the_api_key() -> None:
    with pytest.raises(ValidationError, match="must differ"):
        Settings(api_key=SecretStr(API_KEY), moderator_key=SecretStr(API_KEY))


def _login(client: Any, **headers: str) -> Any:
    return login(client, headers=headers)


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
