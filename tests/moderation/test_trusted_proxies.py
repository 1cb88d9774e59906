"""Forwarded headers believed from a configured proxy only (SIDECAR_TRUSTED_PROXIES).

The documented Docker setup binds the API to the Docker bridge (172.17.0.1) behind the host's
proxy: anything that reaches that address directly (the forum's container, another container)
could write ``X-Forwarded-For`` itself. Trusted, each forged value was a fresh client for the
wrong-key counts, and a forged forum address locked the forum out. Now the headers count only
when the request comes from one of the trusted proxies.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pydantic import ValidationError

from sidecar.config.settings import Settings
from sidecar.moderation.throttle import MAX_FAILURES
from tests.conftest import API_KEY

FORUM = "172.17.0.2"  # the forum's container, calling the sidecar on the bridge directly
NEIGHBOUR = "172.17.0.9"  # another container on the same bridge
HOST_PROXY = "172.17.0.1"  # the host's nginx, proxying to 172.17.0.1:8340
ROUTE = "/v1/topics/9/related"


def _client(mod_state: Any, **settings: Any) -> Any:
    from sidecar.api.app import create_app

    updated = mod_state.settings.model_copy(update=settings)
    return create_app(updated, dataclasses.replace(mod_state, settings=updated)).test_client()


def _get(http: Any, peer: str, key: str, forwarded: str | None = None) -> int:
    headers = {"Authorization": f"Bearer {key}"}
    if forwarded:
        headers["X-Forwarded-For"] = forwarded
    return int(http.get(ROUTE, headers=headers, environ_base={"REMOTE_ADDR": peer}).status_code)


def test_a_forged_forwarded_for_from_an_untrusted_peer_is_ignored(mod_state: Any) -> None:
    http = _client(mod_state, proxy_hops=1)  # trusted proxies: the default, loopback
    # Each guess claims a new address: it is still the one client it connects from.
    codes = [_get(http, NEIGHBOUR, f"guess{i}", forwarded=f"198.51.100.{i}") for i in range(15)]
    assert codes == [401] * MAX_FAILURES + [429] * (15 - MAX_FAILURES)
    # It cannot lock the forum's container out by claiming its address either.
    assert _get(http, NEIGHBOUR, "guess", forwarded=FORUM) == 429  # its own bucket, spent
    assert _get(http, FORUM, API_KEY) == 200
    # The scheme too: an untrusted peer's X-Forwarded-Proto is dropped.
    probe = http.get("/v1/health", headers={"X-Forwarded-Proto": "https"},
                     environ_base={"REMOTE_ADDR": NEIGHBOUR})
    assert probe.request.scheme == "http"


def test_the_configured_proxy_reports_the_client(mod_state: Any) -> None:
    http = _client(mod_state, proxy_hops=1, trusted_proxies=f"{HOST_PROXY}, ::1")
    # From the host's proxy, each client is the one it reports...
    codes = [_get(http, HOST_PROXY, f"guess{i}", forwarded="203.0.113.77")
             for i in range(MAX_FAILURES + 1)]
    assert codes[-1] == 429
    assert _get(http, HOST_PROXY, API_KEY, forwarded="203.0.113.78") == 200
    # ...and loopback, no longer listed, is a client like any other.
    assert _get(http, "127.0.0.1", API_KEY, forwarded="203.0.113.77") == 200


def test_the_setting_is_checked_and_given_to_gunicorn() -> None:
    from sidecar.api.gunicorn_config import api_options

    with pytest.raises(ValidationError, match="not an IP address or network"):
        Settings(trusted_proxies="127.0.0.1, localhost")
    options = api_options(Settings(proxy_hops=1, trusted_proxies="172.17.0.1, 10.0.0.7/24"))
    assert options["forwarded_allow_ips"] == "172.17.0.1,10.0.0.0/24"
    assert api_options(Settings(trusted_proxies="172.17.0.1"))["forwarded_allow_ips"] == ""
