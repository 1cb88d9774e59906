"""The runner's ``http.*``: requests as discourse-ai sends them, to real servers.

What ``tool_runner/http.rb`` and ``Tools::Tool.send_http_request`` do, kept here:

* every call counts, failed ones too; past 20 in one run the call raises
  ``TooManyRequestsError`` ("Tool made too many HTTP requests"), a JavaScript error;
* headers as given plus ``User-Agent: Discourse AI Bot 1.0 (https://www.discourse.org)``; a
  body without a ``Content-Type`` goes as ``application/x-www-form-urlencoded`` (Net::HTTP's
  default); redirects are not followed; the answer is ``{status, body}`` whatever the status;
* TLS is used for every port but 80 (``use_ssl: uri.port != 80``): ``http://host:8340`` fails;
* FinalDestination refuses a host resolving to a private address unless the site setting
  ``allowed_internal_hosts`` names it;
* a connection refused, a name that does not resolve or a read timeout raise, as Net::HTTP does.

Tests never reach the network: a host resolves only through :class:`Route` (its address, and
where the test server listens), standing in for DNS and a TLS-terminating proxy in front of it.
"""

from __future__ import annotations

import http.client
import ipaddress
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

MAX_HTTP_REQUESTS = 20
USER_AGENT = "Discourse AI Bot 1.0 (https://www.discourse.org)"


@dataclass(frozen=True)
class Route:
    """A host as the network knows it: the address it resolves to, and the server behind it."""

    address: str  # what DNS answers (decides FinalDestination's private-address check)
    target: str  # http://127.0.0.1:PORT of the test server


@dataclass
class Sent:
    """One request the tool sent (or tried to)."""

    method: str
    url: str
    headers: dict[str, str]
    body: str | None
    status: int | None = None
    response: str | None = None  # the body the script got
    error: str | None = None


@dataclass
class Network:
    """What one Discourse site reaches: named hosts, its ``allowed_internal_hosts``."""

    routes: dict[str, Route] = field(default_factory=dict)
    allowed_internal_hosts: list[str] = field(default_factory=list)
    read_timeout_s: float = 60.0  # Net::HTTP's default

    def request(self, sent: list[Sent], method: str, url: str,
                options: dict[str, Any] | None) -> dict[str, Any]:
        """One call of ``http.<method>``; ``sent`` is the run's record (and counter)."""
        options = options or {}
        headers = {str(k): str(v) for k, v in (options.get("headers") or {}).items()}
        body = options.get("body") if method != "get" else None
        headers["User-Agent"] = USER_AGENT
        if body is not None and not any(k.lower() == "content-type" for k in headers):
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        record = Sent(method.upper(), str(url), headers, body)
        sent.append(record)
        if len(sent) > MAX_HTTP_REQUESTS:
            record.error = "Tool made too many HTTP requests"
            raise RuntimeError(record.error)
        try:
            record.status, text = self._send(record)
            record.response = text
        except Exception as error:
            record.error = str(error)
            raise
        return {"status": record.status, "body": text}

    def _send(self, record: Sent) -> tuple[int, str]:
        parts = urlsplit(record.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"bad URI(is not URI?): {record.url!r}")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        route = self.routes.get(parts.hostname)
        if route is None:
            raise OSError(f"Failed to open TCP connection to {parts.hostname}:{port} "
                          "(getaddrinfo: Name or service not known)")
        if ipaddress.ip_address(route.address).is_private and \
                parts.hostname not in self.allowed_internal_hosts:
            raise PermissionError("FinalDestination: all resolved IPs were disallowed "
                                  f"({parts.hostname}: a private address, not in "
                                  "allowed_internal_hosts)")
        if parts.scheme == "http" and port != 80:
            raise ConnectionError(f"SSL_connect returned=1 errno=0 peeraddr={route.address}:{port} "
                                  "state=error: wrong version number (TLS to a plain HTTP port)")
        target = urlsplit(route.target)
        conn = http.client.HTTPConnection(target.hostname or "127.0.0.1", target.port,
                                          timeout=self.read_timeout_s)
        try:
            path = parts.path or "/"
            conn.request(record.method, path + (f"?{parts.query}" if parts.query else ""),
                         body=record.body.encode() if record.body is not None else None,
                         headers={**record.headers, "Host": parts.netloc})
            response = conn.getresponse()
            return response.status, response.read().decode("utf-8", "replace")
        except TimeoutError as error:
            raise TimeoutError("Net::ReadTimeout with #<TCPSocket:(closed)>") from error
        finally:
            conn.close()
