"""Terminal runs: :class:`HostTerminal`, the run records and :class:`TerminalRoutes`.

``POST /api/terminal/run`` starts a run, ``GET /api/terminal/runs/{id}`` is its status and
``WS /api/terminal/runs/{id}/stream`` streams its output through the ``terminal_output`` hub.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.websockets import WebSocket, WebSocketDisconnect

from agentplug.actions.terminal import LocalTerminalService, TerminalResult, TerminalService
from agentplug.api.guard import _deny
from agentplug.api.responses import _error
from agentplug.api.routes.base import ApiBase
from agentplug.core.errors import AgentplugError

if TYPE_CHECKING:
    from agentplug.actions.builtins.comms import OutputHub, ShellSettings
    from agentplug.core.host import PluginHost

log = logging.getLogger("agentplug.api")

TERMINAL_SERVICE = "terminal"
"""Runtime service name of a host-provided terminal (the one ``SHELL_COMMAND`` uses)."""

MAX_ACTIVE_RUNS = 8
MAX_KEPT_RUNS = 128
MAX_TIMEOUT_S = 24 * 3600.0


class HostTerminal:
    """The host's terminal service, looked up at each run.

    The runtime service ``terminal`` (a host replacement, the one ``SHELL_COMMAND`` uses)
    when registered; otherwise a :class:`LocalTerminalService` rooted at the operator's
    ``actions.shell.cwd``, else ``default_cwd``.
    """

    def __init__(self, host: PluginHost, default_cwd: str | os.PathLike[str]) -> None:
        self.host = host
        self.default_cwd = Path(default_cwd)

    def resolve(self) -> TerminalService:
        """The service the next run goes through (``FileNotFoundError`` for a missing cwd)."""
        service = self.host.actions.get_service(TERMINAL_SERVICE)
        if service is not None and callable(getattr(service, "run", None)):
            return cast("TerminalService", service)
        configured = _shell_settings(self.host).cwd
        return LocalTerminalService(Path(configured) if configured else self.default_cwd)

    async def run(
        self,
        command: str,
        *,
        cwd: str | None,
        timeout_s: float,
        max_output_bytes: int,
        on_output: Callable[[str], None] | None = None,
    ) -> TerminalResult:
        """Run ``command`` through :meth:`resolve`'s service."""
        return await self.resolve().run(
            command,
            cwd=cwd,
            timeout_s=timeout_s,
            max_output_bytes=max_output_bytes,
            on_output=on_output,
        )


def _shell_settings(host: PluginHost) -> ShellSettings:
    from agentplug.actions.builtins.comms import ShellSettings, load_settings

    return load_settings(host.config.actions, "shell", ShellSettings)


@dataclass
class _Run:
    run_id: str
    command: str
    cwd: str | None
    timeout_s: float
    started_at: float = field(default_factory=time.time)
    result: TerminalResult | None = None
    error: str | None = None
    task: asyncio.Task[None] | None = None

    @property
    def finished(self) -> bool:
        return self.result is not None or self.error is not None

    def exit_message(self) -> dict[str, Any]:
        result = self.result
        return {
            "type": "exit",
            "run_id": self.run_id,
            "exit_code": result.exit_code if result else None,
            "truncated": result.truncated if result else False,
            "timed_out": result.timed_out if result else False,
            "duration_ms": round(result.duration_ms, 3) if result else None,
            "error": self.error,
        }

    def to_json(self) -> dict[str, Any]:
        result = self.result
        status = "running"
        if self.error is not None:
            status = "failed"
        elif result is not None:
            status = "timed_out" if result.timed_out else "exited"
        return {
            "run_id": self.run_id,
            "command": self.command,
            "cwd": self.cwd,
            "timeout_s": self.timeout_s,
            "started_at": self.started_at,
            "status": status,
            "exit_code": result.exit_code if result else None,
            "output": result.output if result else None,
            "truncated": result.truncated if result else False,
            "timed_out": result.timed_out if result else False,
            "duration_ms": round(result.duration_ms, 3) if result else None,
            "error": self.error,
        }


class TerminalRoutes(ApiBase):
    """The terminal endpoints of :class:`~agentplug.api.app.ControlApi`."""

    runs: OrderedDict[str, _Run]

    async def terminal_run(self, request: Request) -> Response:
        body = await self._body(request)
        command = body.get("command")
        if not isinstance(command, str) or not command.strip():
            return _error(400, "'command' must be a non-empty string (the shell command line)")
        if "\x00" in command:
            return _error(400, "'command' contains a NUL byte")
        cwd = body.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            return _error(
                400, "'cwd' must be a string relative to the terminal's working directory"
            )
        try:
            settings = _shell_settings(self.host)
        except AgentplugError as exc:
            return _error(500, f"invalid terminal settings: {exc}")
        if not settings.enabled:
            return _error(
                403,
                "the terminal is off: shell commands run only when the operator sets "
                "actions.shell.enabled to true in the config (it also enables SHELL_COMMAND)",
            )
        timeout = body.get("timeout_s", settings.timeout_seconds)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout <= MAX_TIMEOUT_S
        ):
            return _error(400, f"'timeout_s' must be a number of seconds in (0, {MAX_TIMEOUT_S:g}]")
        active = sum(1 for run in self.runs.values() if not run.finished)
        if active >= MAX_ACTIVE_RUNS:
            return _error(429, f"{active} terminal runs are still running; wait for one to finish")
        problem = self._check_cwd(cwd)
        if problem is not None:
            return _error(400, problem)
        run = _Run(uuid.uuid4().hex, command, cwd, float(timeout))
        hub = self._hub()
        hub.start(run.run_id, command)  # before returning the id: a subscriber misses nothing
        self.runs[run.run_id] = run
        self._forget_old_runs()
        run.task = asyncio.get_running_loop().create_task(
            self._execute(run, hub, settings.max_output_bytes)
        )
        return JSONResponse({"run_id": run.run_id}, status_code=202)

    def _check_cwd(self, cwd: str | None) -> str | None:
        try:
            service = self.terminal.resolve() if isinstance(self.terminal, HostTerminal) else None
        except (FileNotFoundError, AgentplugError) as exc:
            return f"{exc} (set actions.shell.cwd in the config)"
        if cwd is None or not isinstance(service, LocalTerminalService):
            return None
        root = service.working_dir
        target = (root / cwd).resolve()
        if not target.is_relative_to(root):
            return f"cwd {cwd!r} is outside the terminal's working directory {str(root)!r}"
        if not target.is_dir():
            return f"cwd {cwd!r} does not exist under {str(root)!r}"
        return None

    async def _execute(self, run: _Run, hub: OutputHub, max_output_bytes: int) -> None:
        try:
            result = await self.terminal.run(
                run.command,
                cwd=run.cwd,
                timeout_s=run.timeout_s,
                max_output_bytes=max_output_bytes,
                on_output=lambda text: hub.publish(run.run_id, text),
            )
            if not isinstance(result, TerminalResult):
                result = TerminalResult.model_validate(result, from_attributes=True)
            run.result = result
            hub.finish(run.run_id, result.exit_code)
        except asyncio.CancelledError:
            run.error = "cancelled: the API server is shutting down"
            hub.finish(run.run_id, None, error=run.error)
            raise
        except Exception as exc:  # the terminal refused or crashed: report, close the stream
            run.error = f"{type(exc).__name__}: {exc}"
            hub.finish(run.run_id, None, error=run.error)
            log.warning("terminal run %s failed: %s", run.run_id, run.error)

    def _forget_old_runs(self) -> None:
        excess = len(self.runs) - MAX_KEPT_RUNS
        for run_id in [k for k, r in self.runs.items() if r.finished][: max(0, excess)]:
            del self.runs[run_id]

    async def terminal_status(self, request: Request) -> Response:
        run = self.runs.get(request.path_params["run_id"])
        if run is None:
            return _error(404, f"no terminal run {request.path_params['run_id']!r}")
        return JSONResponse(run.to_json())

    async def terminal_stream(self, websocket: WebSocket) -> None:
        run_id = websocket.path_params["run_id"]
        run = self.runs.get(run_id)
        if run is None:
            await _deny(
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

    async def _messages(self, run: _Run) -> AsyncIterator[dict[str, Any]]:
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
        tasks = [r.task for r in self.runs.values() if r.task is not None and not r.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
