"""The latest turns with their traces (:class:`TurnRoutes`): what the timeline shows.

``GET /api/turns`` ``?session=<key>&limit=<n>``: the gateway's latest turns, newest first
(running ones included; see :class:`~agentplug.agent.turnlog.TurnLog`); ``GET
/api/turns/{run_id}``: one of them. A row holds the turn's status, timings and trace (each
hook with its handlers' plugin, status and duration, each model and tool call, the
decisions taken and public reasons): never the transcript, the reply or a confidential
reason.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentplug.api.responses import error_response
from agentplug.api.routes.base import ApiBase

__all__ = ["MAX_TURNS_LISTED", "TurnRoutes"]

MAX_TURNS_LISTED = 200
"""The most turns one ``GET /api/turns`` returns."""


class TurnRoutes(ApiBase):
    """The turn endpoints of :class:`~agentplug.api.app.ControlApi`."""

    async def turns_list(self, request: Request) -> Response:
        raw = request.query_params.get("limit", "50")
        if not raw.isdigit() or not 0 < int(raw) <= MAX_TURNS_LISTED:
            return error_response(400, f"'limit' must be a whole number in 1..{MAX_TURNS_LISTED}")
        session = request.query_params.get("session") or None
        rows = self.gateway.turns.recent(int(raw), session_key=session)
        return JSONResponse({"turns": rows})

    async def turns_get(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        row = self.gateway.turns.get(run_id)
        if row is None:
            return error_response(
                404, f"no turn {run_id!r} in the gateway's latest turns (see GET /api/turns)"
            )
        return JSONResponse(row)
