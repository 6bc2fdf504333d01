"""Session rows and the extension patch (:class:`SessionRoutes`).

``GET /api/sessions`` lists the sessions that hold plugin state, each row with its
``plugin_extensions``; ``GET /api/sessions/{key}`` is one row;
``PATCH /api/sessions/{key}/plugins/{plugin_id}`` applies a JSON merge patch (RFC 7396)
to that plugin's extensions in that session (the seed's ``sessions.pluginPatch``).

``POST /api/sessions/{key}/messages`` ``{content, sender_id?, channel?, ...}`` runs one
turn through the gateway's runner, the inbound path of any channel (``inbound_claim``,
``message_received``, the turn, delivery) on that session, and answers with the
:class:`~agentplug.agent.turn.TurnResult` (no transcript unless ``?transcript=1``). The
body is bounded (:data:`MAX_MESSAGE_BODY_BYTES`) and so is the number of turns running at
once through the API (:data:`MAX_ACTIVE_TURNS`, 429 past it). An approval the turn asks
for waits for a decision from any entrance sharing the gateway's store.
"""

from __future__ import annotations

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentplug.agent.turn import InboundMessage
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
MAX_MESSAGE_BODY_BYTES = 256 * 1024
"""Largest body of ``POST /api/sessions/{key}/messages``."""
MAX_ACTIVE_TURNS = 256
"""Turns running at once through the API; past it the answer is 429."""


class SessionRoutes(ApiBase):
    """The session endpoints of :class:`~agentplug.api.app.ControlApi`."""

    active_turns = 0
    """Turns this API is running now (instances count their own)."""

    async def sessions_post_message(self, request: Request) -> Response:
        key = request.path_params["session_key"]
        body = await self._body(request, MAX_MESSAGE_BODY_BYTES)
        if "session_key" in body:
            return error_response(
                400, "the session is the URL's; leave 'session_key' out of the body"
            )
        try:
            message = InboundMessage.model_validate({"channel": "api", **body, "session_key": key})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "body"
            return error_response(400, f"message field {where!r}: {first['msg']}")
        if self.active_turns >= MAX_ACTIVE_TURNS:
            return error_response(
                429,
                f"{self.active_turns} turns are running (the limit is {MAX_ACTIVE_TURNS}); retry",
            )
        self.active_turns += 1
        try:
            result = await self.gateway.runner.handle_inbound(message)
        finally:
            self.active_turns -= 1
        exclude = None if request.query_params.get("transcript") == "1" else {"transcript"}
        return JSONResponse(result.model_dump(mode="json", exclude=exclude))

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
