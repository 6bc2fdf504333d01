"""Browser logins of the control room: the API token pasted once, a cookie after that.

``POST /api/ui/login`` ``{token}`` checks the token (constant time) and answers with a
cookie naming a random login id (never the token): ``HttpOnly`` (page scripts cannot
read it), ``SameSite=Strict`` (no other site's page sends it), ``Path=/``, for
:data:`LOGIN_TTL_S`. The ids live in this process only (:class:`Logins`): a restart or
``POST /api/ui/logout`` ends them. The cookie's name carries the port, so two servers on
one loopback address keep their logins apart (browsers share cookies across ports).

A cookie is ambient (the browser sends it by itself), so :class:`~agentplug.api.guard.Guard`
holds a request it authenticates to the page's own origin; see there.
"""

from __future__ import annotations

import hmac
import json
import secrets
import threading
import time
from collections import OrderedDict

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentplug.api.responses import error_response

__all__ = [
    "COOKIE_PREFIX",
    "LOGIN_TTL_S",
    "MAX_LOGINS",
    "Logins",
    "cookie_name",
]

COOKIE_PREFIX = "agentplug_ui_"
"""Prefix of the login cookie's name (the server's port follows)."""
LOGIN_TTL_S = 12 * 3600
"""How long a browser login lasts."""
MAX_LOGINS = 64
"""Browser logins kept at once (a new one past it ends the oldest)."""
MAX_TOKEN_CHARS = 4096


def cookie_name(host_header: str | None) -> str:
    """The login cookie's name for the server the ``Host`` header names (its port)."""
    value = (host_header or "").strip()
    if value.startswith("["):  # [::1]:8731
        rest = value[value.find("]") + 1 :]
        port = rest[1:] if rest.startswith(":") else ""
    else:
        port = value.partition(":")[2]
    return COOKIE_PREFIX + (port if port.isdigit() else "80")


class Logins:
    """The browser logins of one control API (random ids, each with an expiry)."""

    def __init__(self, token: str) -> None:
        self._token = token.encode("utf-8")
        self._ids: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def token_matches(self, presented: str) -> bool:
        """Whether ``presented`` is the API token (constant-time comparison)."""
        return hmac.compare_digest(presented.encode("utf-8"), self._token)

    def issue(self) -> str:
        """A new login id, valid for :data:`LOGIN_TTL_S`."""
        login_id = secrets.token_urlsafe(32)
        with self._lock:
            self._ids[login_id] = time.monotonic() + LOGIN_TTL_S
            while len(self._ids) > MAX_LOGINS:
                self._ids.popitem(last=False)
        return login_id

    def valid(self, login_id: str | None) -> bool:
        """Whether ``login_id`` names a login that has not expired or ended."""
        if not login_id:
            return False
        with self._lock:
            expires = self._ids.get(login_id)
            if expires is None:
                return False
            if time.monotonic() >= expires:
                del self._ids[login_id]
                return False
            return True

    def end(self, login_id: str | None) -> None:
        """End a login (logout)."""
        if login_id:
            with self._lock:
                self._ids.pop(login_id, None)

    # -- the endpoints -----------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        """``POST /api/ui/login`` ``{token}``: the login cookie, or 401."""
        token = await _presented_token(request)
        if not token or not self.token_matches(token):
            return error_response(
                401,
                "that is not this server's API token; paste the content of "
                "<state_dir>/api-token (printed when `agentplug serve` starts)",
            )
        response = JSONResponse({"ok": True})
        response.set_cookie(
            cookie_name(request.headers.get("host")),
            self.issue(),
            max_age=LOGIN_TTL_S,
            path="/",
            httponly=True,
            samesite="strict",
        )
        return response

    async def logout(self, request: Request) -> Response:
        """``POST /api/ui/logout``: ends the login and clears the cookie."""
        name = cookie_name(request.headers.get("host"))
        self.end(request.cookies.get(name))
        response = JSONResponse({"ok": True})
        response.delete_cookie(name, path="/", httponly=True, samesite="strict")
        return response

    async def whoami(self, request: Request) -> Response:
        """``GET /api/ui/session``: how this request was authenticated."""
        return JSONResponse({"ok": True, "via": request.scope.get("agentplug_auth", "bearer")})


async def _presented_token(request: Request) -> str:
    """The ``token`` of a login body (``""`` when absent, malformed or too large: the
    body is read up to a bound, never further)."""

    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_TOKEN_CHARS + 64:
            return ""
        chunks.append(chunk)
    try:
        data = json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        return ""
    token = data.get("token") if isinstance(data, dict) else None
    return token.strip() if isinstance(token, str) else ""
