"""Which forwarded headers the API believes: a configured proxy's, and nobody else's.

Behind a reverse proxy every request reaches the sidecar from the proxy's address, and the
client's own is in ``X-Forwarded-For`` (the scheme in ``X-Forwarded-Proto``). Those headers are
what any client may write, so they are read (``SIDECAR_PROXY_HOPS`` of them, through werkzeug's
``ProxyFix``) only when the request comes from one of ``SIDECAR_TRUSTED_PROXIES``. From any
other peer (a container that reaches the sidecar's port directly, a neighbour on the same
network) they are dropped before anything reads them: the peer's own address is then the
client's, for the wrong-key counts and the logs, and a forged header can neither make each
guess a fresh client nor lock another client out.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from werkzeug.middleware.proxy_fix import ProxyFix

from sidecar.config.networks import Network, contains

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

# Every header by which a client may claim another address, scheme, host or prefix.
FORWARDED_HEADERS = ("HTTP_FORWARDED", "HTTP_X_FORWARDED_FOR", "HTTP_X_FORWARDED_PROTO",
                     "HTTP_X_FORWARDED_HOST", "HTTP_X_FORWARDED_PORT", "HTTP_X_FORWARDED_PREFIX")


class TrustedProxies:
    """WSGI middleware: ``hops`` forwarded values believed from ``trusted`` peers only."""

    def __init__(self, app: WSGIApplication, hops: int, trusted: Sequence[Network]) -> None:
        self._app = app
        self._trusted = tuple(trusted)
        self._proxied = ProxyFix(app, x_for=hops, x_proto=hops) if hops else app

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse
                 ) -> Iterable[bytes]:
        """Hand the request on, through ProxyFix when a trusted proxy sent it."""
        if self._proxied is not self._app and contains(self._trusted,
                                                        environ.get("REMOTE_ADDR")):
            return self._proxied(environ, start_response)
        for header in FORWARDED_HEADERS:  # a client's own claims: nothing downstream reads them
            environ.pop(header, None)
        return self._app(environ, start_response)


def install(app: Any, hops: int, trusted: Sequence[Network]) -> None:
    """Wrap a Flask app's WSGI callable (the app factory)."""
    app.wsgi_app = TrustedProxies(app.wsgi_app, hops, trusted)
