"""Session rows, transcripts, reset and the extension patch (:class:`SessionRoutes`).

``GET /api/sessions`` lists the sessions that hold plugin state or a transcript, each row
with its ``plugin_extensions`` and its message count; ``GET /api/sessions/{key}`` is one
row; ``GET /api/sessions/{key}/transcript`` its messages (the latest
:data:`MAX_TRANSCRIPT_MESSAGES`); ``POST /api/sessions/{key}/reset`` resets it
(:func:`~agentplug.services.sessions.reset_session`: ``before_reset``, the plugins'
cleanup, the transcript forgotten; between two turns of that session, never during one);
``PATCH /api/sessions/{key}/plugins/{plugin_id}`` applies a JSON merge patch (RFC 7396)
to that plugin's extensions in that session (the seed's ``sessions.pluginPatch``).

``POST /api/sessions/{key}/messages`` ``{content, sender_id?, channel?, ...}`` runs one
turn through the gateway's runner, the inbound path of any channel (``inbound_claim``,
``message_received``, the turn, delivery) on that session, and answers with the
:class:`~agentplug.agent.turn.TurnResult` (no transcript unless ``?transcript=1``). The
body is bounded (:data:`MAX_MESSAGE_BODY_BYTES`) and so is the number of turns running at
once through the API (:data:`MAX_ACTIVE_TURNS`, 429 past it). An approval the turn asks
for waits for a decision from any entrance sharing the gateway's store.
``POST /api/sessions/{key}/messages/stream`` is the same turn as server-sent events
(:mod:`agentplug.api.routes.chat`).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentplug.agent.transcript import StateStoreTranscripts
from agentplug.agent.turn import InboundMessage
from agentplug.api.responses import error_response
from agentplug.api.routes.base import ApiBase
from agentplug.core.redaction import scrub_data
from agentplug.services.sessions import (
    MAX_EXTENSION_STATE_BYTES,
    ExtensionOwnerError,
    ExtensionStateTooLarge,
    SessionStateError,
    UnknownExtensionError,
    patch_plugin_extensions,
    reset_session,
    session_keys,
)

MAX_PATCH_BODY_BYTES = 4 * MAX_EXTENSION_STATE_BYTES
"""Largest body of an extension patch (each extension's state is bounded on its own)."""
MAX_MESSAGE_BODY_BYTES = 256 * 1024
"""Largest body of ``POST /api/sessions/{key}/messages``."""
MAX_ACTIVE_TURNS = 256
"""Turns running at once through the API; past it the answer is 429."""
MAX_SESSION_ROWS = 500
"""Rows ``GET /api/sessions`` lists at most (``truncated`` says when there were more)."""
MAX_TRANSCRIPT_MESSAGES = 500
"""Messages ``GET /api/sessions/{key}/transcript`` returns at most (the latest)."""


class SessionRoutes(ApiBase):
    """The session endpoints of :class:`~agentplug.api.app.ControlApi`."""

    active_turns = 0
    """Turns this API is running now (instances count their own)."""

    def _inbound(self, key: str, body: dict[str, Any]) -> InboundMessage | Response:
        """The message a turn body describes, or the 400 saying what is wrong."""
        if "session_key" in body:
            return error_response(
                400, "the session is the URL's; leave 'session_key' out of the body"
            )
        try:
            return InboundMessage.model_validate({"channel": "api", **body, "session_key": key})
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"]) or "body"
            return error_response(400, f"message field {where!r}: {first['msg']}")

    def _turns_full(self) -> Response | None:
        if self.active_turns >= MAX_ACTIVE_TURNS:
            return error_response(
                429,
                f"{self.active_turns} turns are running (the limit is {MAX_ACTIVE_TURNS}); retry",
            )
        return None

    async def sessions_post_message(self, request: Request) -> Response:
        key = request.path_params["session_key"]
        body = await self._body(request, MAX_MESSAGE_BODY_BYTES)
        message = self._inbound(key, body)
        if isinstance(message, Response):
            return message
        full = self._turns_full()
        if full is not None:
            return full
        self.active_turns += 1
        try:
            result = await self.gateway.runner.handle_inbound(message)
        finally:
            self.active_turns -= 1
        exclude = None if request.query_params.get("transcript") == "1" else {"transcript"}
        # Serialised by pydantic straight to bytes: no dict copy for ``json.dumps`` to walk.
        return Response(result.model_dump_json(exclude=exclude), media_type="application/json")

    def _message_counts(self) -> dict[str, int]:
        transcripts = self.gateway.runner.transcripts
        if isinstance(transcripts, StateStoreTranscripts):
            return transcripts.counts()
        return {}

    def _row(self, key: str, counts: dict[str, int]) -> dict[str, Any]:
        return {**self.gateway.sessions.session_row(key), "messages": counts.get(key, 0)}

    def _listed(self, key: str, counts: dict[str, int]) -> dict[str, Any]:
        try:
            return self._row(key, counts)
        except SessionStateError:  # a transcript key the extension rules do not accept
            return {"session_key": key, "plugin_extensions": {}, "messages": counts.get(key, 0)}

    async def sessions_list(self, request: Request) -> Response:
        sessions = self.gateway.sessions
        counts = self._message_counts()
        keys = sorted(set(session_keys(sessions)) | set(counts))
        rows = [self._listed(key, counts) for key in keys[:MAX_SESSION_ROWS]]
        return JSONResponse(
            {
                "sessions": rows,
                "extensions": sessions.extensions(),
                "truncated": len(keys) > MAX_SESSION_ROWS,
            }
        )

    async def sessions_get(self, request: Request) -> Response:
        key = request.path_params["session_key"]
        try:
            return JSONResponse(self._row(key, self._message_counts()))
        except SessionStateError as exc:
            return error_response(400, str(exc))

    async def sessions_transcript(self, request: Request) -> Response:
        key = request.path_params["session_key"]
        try:
            record = self.gateway.runner.transcripts.load(key)
        except ValueError as exc:  # a key the store refuses
            return error_response(400, f"session key {key!r}: {exc}")
        if record is None:
            return error_response(404, f"session {key!r} has no transcript (no turn ran in it)")
        messages = record.messages
        return JSONResponse(
            {
                "session_key": key,
                "session_id": record.session_id,
                "summary": scrub_data(record.summary),
                "total": len(messages),
                "messages": scrub_data(messages[-MAX_TRANSCRIPT_MESSAGES:]),
            }
        )

    async def sessions_reset(self, request: Request) -> Response:
        key = request.path_params["session_key"]
        runner = self.gateway.runner
        try:
            async with runner.session_lock(key):  # never in the middle of a turn
                report = await reset_session(
                    self.gateway.sessions,
                    key,
                    source="api",
                    transcripts=runner.transcripts,
                    agent_id=runner.agent_id,
                )
        except SessionStateError as exc:
            return error_response(400, str(exc))
        return JSONResponse(
            {
                "session_key": key,
                "reset": True,
                "session_id": report.session_id,
                "transcript_deleted": report.transcript_deleted,
            }
        )

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
