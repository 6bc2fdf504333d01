"""Terminal runs over HTTP and WebSocket (:class:`TerminalRoutes`).

``POST /api/terminal/run`` starts a run, ``GET /api/terminal/runs/{id}`` is its status and
``WS /api/terminal/runs/{id}/stream`` streams its output through the ``terminal_output``
hub. Every run the host starts goes through the same
:class:`~agentplug.actions.builtins.comms.runs.TerminalRuns` (``SHELL_COMMAND``, custom
shell actions, the API), so any of them can be followed here.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from agentplug.actions.builtins.comms.runs import (
    MAX_KEPT_RUNS,
    TERMINAL_SERVICE,
    HostTerminal,
    ShellRefused,
    TerminalRun,
    TerminalRuns,
)
from agentplug.actions.builtins.comms.settings import DEFAULT_MAX_ACTIVE_RUNS
from agentplug.api.guard import deny
from agentplug.api.responses import error_response
from agentplug.api.routes.base import ApiBase

__all__ = [
    "MAX_ACTIVE_RUNS",
    "MAX_KEPT_RUNS",
    "MAX_TIMEOUT_S",
    "TERMINAL_SERVICE",
    "HostTerminal",
    "TerminalRoutes",
]

MAX_ACTIVE_RUNS = DEFAULT_MAX_ACTIVE_RUNS
"""Default cap on commands running at once (``actions.shell.maxActiveRuns``)."""
MAX_TIMEOUT_S = 24 * 3600.0


class TerminalRoutes(ApiBase):
    """The terminal endpoints of :class:`~agentplug.api.app.ControlApi`."""

    terminal_runs: TerminalRuns

    async def terminal_run(self, request: Request) -> Response:
        body = await self._body(request)
        command = body.get("command")
        if not isinstance(command, str) or not command.strip():
            return error_response(
                400, "'command' must be a non-empty string (the shell command line)"
            )
        if "\x00" in command:
            return error_response(400, "'command' contains a NUL byte")
        cwd = body.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            return error_response(
                400, "'cwd' must be a string relative to the terminal's working directory"
            )
        runs = self.terminal_runs
        try:
            settings = runs.settings()
        except ShellRefused as exc:
            return error_response(exc.status, str(exc))
        timeout = body.get("timeout_s", settings.timeout_seconds)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout <= MAX_TIMEOUT_S
        ):
            return error_response(
                400, f"'timeout_s' must be a number of seconds in (0, {MAX_TIMEOUT_S:g}]"
            )
        try:
            run = runs.start(command, cwd=cwd, timeout_s=float(timeout), source="api")
        except ShellRefused as exc:
            return error_response(exc.status, str(exc))
        return JSONResponse({"run_id": run.run_id}, status_code=202)

    async def terminal_status(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        run = self.terminal_runs.get(run_id)
        if run is None:
            return error_response(404, f"no terminal run {run_id!r}")
        status = self._hub().status(run_id)
        return JSONResponse(run.to_json(status.chunks if status is not None else None))

    async def terminal_stream(self, websocket: WebSocket) -> None:
        run_id = websocket.path_params["run_id"]
        run = self.terminal_runs.get(run_id)
        if run is None:
            await deny(
                websocket.scope,
                websocket.receive,
                websocket.send,
                404,
                f"no terminal run {run_id!r}",
            )
            return
        await websocket.accept()
        try:
            async for message in self._messages(run):
                await websocket.send_json(message)
            await websocket.close(code=1000)
        except (WebSocketDisconnect, RuntimeError, OSError):  # the client went away
            return

    async def _messages(self, run: TerminalRun) -> AsyncIterator[dict[str, Any]]:
        hub = self._hub()
        if hub.status(run.run_id) is None:
            # The hub forgot this (old, finished) run: replay the bounded result instead.
            if run.result is not None and run.result.output:
                yield {"type": "output", "run_id": run.run_id, "seq": 0, "data": run.result.output}
        else:
            async for chunk in hub.subscribe(run.run_id):
                yield {"type": "output", "run_id": run.run_id, "seq": chunk.seq, "data": chunk.text}
        if run.task is not None and not run.finished:
            # The hub closed the stream; the task records the result just before that.
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(run.task)
        yield run.exit_message()

    async def aclose(self) -> None:
        """Cancel terminal runs still running (their process groups are killed)."""
        await self.terminal_runs.aclose()
