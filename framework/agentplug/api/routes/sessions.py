"""Session rows and the extension patch (:class:`SessionRoutes`).

``GET /api/sessions`` lists the sessions that hold plugin state, each row with its
``plugin_extensions``; ``GET /api/sessions/{key}`` is one row;
``PATCH /api/sessions/{key}/plugins/{plugin_id}`` applies a JSON merge patch (RFC 7396)
to that plugin's extensions in that session (the seed's ``sessions.pluginPatch``).
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentplug.api.responses import error_response
from agentplug.api.routes.base import ApiBase
from agentplug.services.sessions import (
    MAX_EXTENSION_STATE_BYTES,
    ExtensionOwnerError,
    ExtensionStateTooLarge,
    SessionStateError,
    UnknownExtensionError,
    patch_plugin_extensions,
    session_keys,
)

MAX_PATCH_BODY_BYTES = 4 * MAX_EXTENSION_STATE_BYTES
"""Largest body of an extension patch (each extension's state is bounded on its own)."""


class SessionRoutes(ApiBase):
    """The session endpoints of :class:`~agentplug.api.app.ControlApi`."""

    async def sessions_list(self, request: Request) -> Response:
        sessions = self.gateway.sessions
        rows = [sessions.session_row(key) for key in session_keys(sessions)]
        return JSONResponse({"sessions": rows, "extensions": sessions.extensions()})

    async def sessions_get(self, request: Request) -> Response:
        key = request.path_params["session_key"]
        try:
            return JSONResponse(self.gateway.sessions.session_row(key))
        except SessionStateError as exc:
            return error_response(400, str(exc))

    async def sessions_patch_plugin(self, request: Request) -> Response:
        key = request.path_params["session_key"]
        plugin_id = request.path_params["plugin_id"]
        patch = await self._body(request, MAX_PATCH_BODY_BYTES)
        if plugin_id not in {record.plugin_id for record in self.host.plugins}:
            return error_response(404, f"no plugin {plugin_id!r} is loaded (see GET /api/sessions)")
        try:
            state = patch_plugin_extensions(self.gateway.sessions, key, plugin_id, patch)
        except ExtensionOwnerError as exc:
            return error_response(403, str(exc))
        except UnknownExtensionError as exc:
            return error_response(404, str(exc))
        except ExtensionStateTooLarge as exc:
            return error_response(413, str(exc))
        except SessionStateError as exc:
            return error_response(400, str(exc))
        return JSONResponse({"session_key": key, "plugin_id": plugin_id, "state": state})
