"""The control API's guard: loopback ``Host``/``Origin`` and the bearer token.

:class:`Guard` is the ASGI middleware :func:`~agentplug.api.app.create_app` installs;
:func:`deny` answers a refused HTTP request or WebSocket handshake (the terminal stream
uses it too).
"""

from __future__ import annotations

import hmac

from starlette.datastructures import Headers, QueryParams
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from agentplug.api.loopback import host_header_is_loopback, origin_is_loopback
from agentplug.api.responses import error_response

__all__ = ["Guard", "deny"]

_PUBLIC_PATHS = frozenset({"/api/health"})


class Guard:
    """ASGI middleware: loopback ``Host``/``Origin`` first, then the bearer token."""

    def __init__(self, app: ASGIApp, *, token: str) -> None:
        self.app = app
        self._token = token.encode("utf-8")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
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
        if scope["path"] not in _PUBLIC_PATHS and not self._authorized(scope, headers):
            await deny(
                scope,
                receive,
                send,
                401,
                "missing or wrong API token: send 'Authorization: Bearer <token>' (WebSockets "
                "may use ?token=<token>); the token is in <state_dir>/api-token",
            )
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope, headers: Headers) -> bool:
        presented: str | None = None
        scheme, _, credentials = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and credentials.strip():
            presented = credentials.strip()
        elif scope["type"] == "websocket":
            presented = QueryParams(scope.get("query_string", b"").decode("latin-1")).get("token")
        if not presented:
            return False
        return hmac.compare_digest(presented.encode("utf-8"), self._token)


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
