"""The control API's guard: loopback ``Host``/``Origin``, then the token or a login cookie.

:class:`Guard` is the ASGI middleware :func:`~agentplug.api.app.create_app` installs;
:func:`deny` answers a refused HTTP request or WebSocket handshake (the terminal stream
uses it too).

Two ways in:

* ``Authorization: Bearer <token>`` (scripts, the CLI; WebSockets may pass ``?token=``).
  A browser request carrying it must still come from a loopback ``Origin``.
* The control room's login cookie (:mod:`agentplug.api.logins`). A cookie is sent by the
  browser on its own, so a request it authenticates must come from the page's own origin
  (same scheme, host and port as the ``Host`` it was sent to): a request whose ``Origin``
  is anything else is refused, so is one the browser marks ``Sec-Fetch-Site: same-site``
  or ``cross-site`` (another port of localhost is the same *site*), and a state-changing
  request (anything but ``GET``/``HEAD``) or a WebSocket without an ``Origin`` at all.

Without either, only ``/api/health``, the login endpoint and the page's static files
answer. Every response carries ``nosniff``, ``no-referrer``, a frame ban and a
same-origin resource policy; API answers are never cached.
"""

from __future__ import annotations

import hmac
from http.cookies import SimpleCookie

from starlette.datastructures import Headers, QueryParams
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from starlette.websockets import WebSocket

from agentplug.api.logins import Logins, cookie_name
from agentplug.api.loopback import host_header_is_loopback, origin_is_loopback
from agentplug.api.responses import error_response

__all__ = ["Guard", "deny", "own_origin"]

_PUBLIC_PATHS = frozenset({"/api/health", "/api/ui/login"})
_PUBLIC_PREFIXES = ("/ui/",)
_SAFE_METHODS = frozenset({"GET", "HEAD"})
_SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
_API_HEADERS = [
    (b"cache-control", b"no-store"),
    (b"content-security-policy", b"default-src 'none'; frame-ancestors 'none'"),
]


def own_origin(headers: Headers) -> str:
    """The origin a page served by this request's server has: ``http://<Host>``."""
    return "http://" + (headers.get("host") or "").strip().lower()


class Guard:
    """ASGI middleware: loopback ``Host``/``Origin`` first, then the bearer token or a
    login cookie held to the page's own origin (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, token: str, logins: Logins | None = None) -> None:
        self.app = app
        self._token = token.encode("utf-8")
        self._logins = logins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        send = _with_security_headers(scope, send)
        headers = Headers(scope=scope)
        host = headers.get("host")
        if not host_header_is_loopback(host):
            await deny(
                scope,
                receive,
                send,
                403,
                f"Host header {host!r} is not a loopback name; this API answers only to "
                "localhost, 127.0.0.1 or [::1] (DNS-rebinding protection)",
            )
            return
        origin = headers.get("origin")
        if origin is not None and not origin_is_loopback(origin):
            await deny(
                scope,
                receive,
                send,
                403,
                f"requests from origin {origin!r} are refused; only pages served from the "
                "loopback interface may call this API",
            )
            return
        path = scope["path"]
        public = path in _PUBLIC_PATHS or path == "/ui" or path.startswith(_PUBLIC_PREFIXES)
        if self._bearer(scope, headers):
            scope["agentplug_auth"] = "bearer"
        elif self._cookie(headers):
            refusal = _cross_origin(scope, headers)
            if refusal is not None:
                await deny(scope, receive, send, 403, refusal)
                return
            scope["agentplug_auth"] = "cookie"
        elif path == "/api/ui/login":
            refusal = _cross_origin(scope, headers)
            if refusal is not None:  # a login is a state change made by a page
                await deny(scope, receive, send, 403, refusal)
                return
        elif not public:
            await deny(
                scope,
                receive,
                send,
                401,
                "missing or wrong API token: send 'Authorization: Bearer <token>' (WebSockets "
                "may use ?token=<token>), or log in to the control room at /ui/; the token is "
                "in <state_dir>/api-token",
            )
            return
        await self.app(scope, receive, send)

    def _bearer(self, scope: Scope, headers: Headers) -> bool:
        presented: str | None = None
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and credentials.strip():
            presented = credentials.strip()
        elif scope["type"] == "websocket":
            presented = QueryParams(scope.get("query_string", b"").decode("latin-1")).get("token")
        if not presented:
            return False
        return hmac.compare_digest(presented.encode("utf-8"), self._token)

    def _cookie(self, headers: Headers) -> bool:
        raw = headers.get("cookie")
        if self._logins is None or not raw:
            return False
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(raw)
        except Exception:  # a malformed Cookie header authenticates nothing
            return False
        morsel = jar.get(cookie_name(headers.get("host")))
        return morsel is not None and self._logins.valid(morsel.value)


def _cross_origin(scope: Scope, headers: Headers) -> str | None:
    """Why a request authenticated by the login cookie is not the page's own, or ``None``."""
    origin = headers.get("origin")
    expected = own_origin(headers)
    if origin is not None and origin.strip().lower() != expected:
        return (
            f"requests from origin {origin!r} may not use the control room's login; only "
            f"{expected} may (send the bearer token instead)"
        )
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        return (
            f"a {site} request may not use the control room's login; only the page at "
            f"{expected} may"
        )
    if origin is None and (
        scope["type"] == "websocket" or scope.get("method") not in _SAFE_METHODS
    ):
        return (
            "a state-changing request with the control room's login must carry an Origin "
            "header (browsers send it); scripts send the bearer token instead"
        )
    return None


def _with_security_headers(scope: Scope, send: Send) -> Send:
    api = scope["path"].startswith("/api/")

    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            present = {name.lower() for name, _ in message.get("headers", [])}
            extra = _SECURITY_HEADERS + (_API_HEADERS if api else [])
            message["headers"] = [
                *message.get("headers", []),
                *((n, v) for n, v in extra if n not in present),
            ]
        await send(message)

    return sending


async def deny(scope: Scope, receive: Receive, send: Send, status: int, message: str) -> None:
    """Refuse the request with ``status`` and an ``{"error": message}`` body; a WebSocket
    handshake gets it as its denial response, or is closed (code 1008) where the server
    cannot send one."""
    response = error_response(status, message)
    if scope["type"] == "http":
        if status == 401:
            response.headers["WWW-Authenticate"] = "Bearer"
        await response(scope, receive, send)
        return
    websocket = WebSocket(scope, receive, send)
    if "websocket.http.response" in scope.get("extensions", {}):
        await websocket.send_denial_response(response)
    else:  # no denial-response support: close the handshake (clients see HTTP 403)
        await websocket.close(code=1008, reason=message[:120])
