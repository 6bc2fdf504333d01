"""The host's terminal runs (service ``terminal_runs``): one way for every command to run.

``SHELL_COMMAND``, custom actions with a ``shell`` handler and the control API's
``POST /api/terminal/run`` all start their commands with :meth:`TerminalRuns.start`, so
they share one set of rules:

* the operator's switch (``actions.shell.enabled``), allow-list
  (``actions.shell.allowedCommands``, :mod:`agentplug.security.commands`), time limit,
  output bound and cap on commands running at once (``maxActiveRuns``; 429 in the API);
* one terminal: the runtime service ``terminal`` when a host registered one, else a
  :class:`~agentplug.actions.terminal.LocalTerminalService` rooted at
  ``actions.shell.cwd`` (its clean environment is the env filtering: nothing of the
  host's environment reaches the command);
* one output hub (``terminal_output``): every run, whoever started it, streams on
  ``WS /api/terminal/runs/{id}/stream`` and has a status at ``GET /api/terminal/runs/{id}``.

A command is a task of its own: callers that must answer quickly (``SHELL_COMMAND``, the
custom action) wait at most ``actions.shell.replyAfterSeconds`` (:meth:`TerminalRuns.wait`)
and otherwise report the run id while the command goes on, as ACTIONS.md's best practice
asks of long-running work.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from agentplug.actions.builtins._shared import get_or_register, load_settings
from agentplug.actions.builtins.comms.hub import OutputHub, output_hub
from agentplug.actions.builtins.comms.settings import ShellSettings
from agentplug.actions.handler_output import HandlerOutput
from agentplug.actions.shell_handler import (
    ShellHandlerDef,
    ShellTemplateError,
    render_command,
    shell_output,
)
from agentplug.actions.terminal import LocalTerminalService, TerminalResult, TerminalService
from agentplug.core.errors import AgentplugError
from agentplug.security.commands import refusal

if TYPE_CHECKING:
    from agentplug.core.host import HookHost
    from agentplug.store import StateStore


class ShellRuntime(Protocol):
    """What the terminal runs use of a gateway's action runtime
    (:class:`~agentplug.actions.runtime.AgentRuntime`)."""

    @property
    def host(self) -> HookHost: ...

    @property
    def store(self) -> StateStore: ...

    @property
    def state_dir(self) -> Path | None: ...

    def get_service(self, name: str) -> object | None: ...

    def register_service(self, name: str, service: object) -> None: ...


__all__ = [
    "MAX_KEPT_RUNS",
    "RUNS_SERVICE",
    "TERMINAL_SERVICE",
    "HostTerminal",
    "ShellRefused",
    "TerminalRun",
    "TerminalRuns",
    "host_shell_backend",
    "still_running_text",
    "terminal_runs",
]

log = logging.getLogger("agentplug.terminal")

RUNS_SERVICE = "terminal_runs"
"""Runtime service name of the host's :class:`TerminalRuns`."""
TERMINAL_SERVICE = "terminal"
"""Runtime service name of a host-provided :class:`TerminalService`."""
MAX_KEPT_RUNS = 128
"""Finished runs remembered for status requests (the oldest are forgotten first)."""


class ShellRefused(AgentplugError):
    """A command was not started. ``status`` is the HTTP status the API answers with,
    ``reason`` a short code (``disabled``, ``not_allowed``, ``busy``, ``bad_cwd``,
    ``no_working_directory``, ``bad_command``, ``bad_run_id``, ``bad_settings``)."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        self.status = status
        self.reason = reason
        super().__init__(message)


class HostTerminal:
    """The host's terminal service, looked up at each run.

    The runtime service ``terminal`` (a host replacement) when registered; otherwise a
    :class:`LocalTerminalService` rooted at the operator's ``actions.shell.cwd``, else
    ``default_cwd``, else the state directory, else the current directory.
    """

    def __init__(
        self, runtime: ShellRuntime, default_cwd: str | os.PathLike[str] | None = None
    ) -> None:
        self.runtime = runtime
        self.default_cwd = Path(default_cwd) if default_cwd is not None else None

    def resolve(self) -> TerminalService:
        """The service the next run goes through (``FileNotFoundError`` for a missing cwd)."""
        service = self.runtime.get_service(TERMINAL_SERVICE)
        if service is not None and callable(getattr(service, "run", None)):
            return cast("TerminalService", service)
        return LocalTerminalService(self._cwd())

    def _cwd(self) -> Path:
        configured = _settings(self.runtime).cwd
        if configured:
            return Path(configured)
        if self.default_cwd is not None:
            return self.default_cwd
        if self.runtime.state_dir is not None:
            return Path(self.runtime.state_dir)
        store_path = getattr(self.runtime.store, "path", None)
        return store_path.parent if isinstance(store_path, Path) else Path.cwd()

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


def _settings(runtime: ShellRuntime) -> ShellSettings:
    return load_settings(runtime.host.config.actions, "shell", ShellSettings)


@dataclass
class TerminalRun:
    """One command: what was asked, by whom, and (once finished) its result."""

    run_id: str
    command: str
    cwd: str | None
    timeout_s: float
    source: str = "api"
    started_at: float = field(default_factory=time.time)
    result: TerminalResult | None = None
    failure: tuple[str, str] | None = None
    """``(exception type, message)`` when the terminal refused or crashed."""
    task: asyncio.Task[None] | None = None

    @property
    def error(self) -> str | None:
        """``"Type: message"`` of a failure, else ``None``."""
        return f"{self.failure[0]}: {self.failure[1]}" if self.failure else None

    @property
    def finished(self) -> bool:
        return self.result is not None or self.failure is not None

    def exit_message(self) -> dict[str, Any]:
        """The stream's last message: ``{type: "exit", exit_code, truncated, ...}``."""
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

    def to_json(self, chunks: int | None = None) -> dict[str, Any]:
        """The status: ``running``, ``exited``, ``timed_out`` or ``failed``, with the result."""
        result = self.result
        status = "running"
        if self.failure is not None:
            status = "failed"
        elif result is not None:
            status = "timed_out" if result.timed_out else "exited"
        return {
            "run_id": self.run_id,
            "command": self.command,
            "cwd": self.cwd,
            "timeout_s": self.timeout_s,
            "source": self.source,
            "started_at": self.started_at,
            "status": status,
            "chunks": chunks,
            "exit_code": result.exit_code if result else None,
            "output": result.output if result else None,
            "truncated": result.truncated if result else False,
            "timed_out": result.timed_out if result else False,
            "duration_ms": round(result.duration_ms, 3) if result else None,
            "error": self.error,
        }


class TerminalRuns:
    """Every command the host runs (see the module docstring); runtime service
    ``terminal_runs``, created by :func:`terminal_runs`."""

    def __init__(
        self,
        runtime: ShellRuntime,
        *,
        default_cwd: str | os.PathLike[str] | None = None,
        terminal: TerminalService | None = None,
    ) -> None:
        self._runtime = runtime
        self.host_terminal = HostTerminal(runtime, default_cwd)
        self.terminal: TerminalService = terminal or self.host_terminal
        """Where commands run (a replacement given by the host, else :class:`HostTerminal`)."""
        self.runs: OrderedDict[str, TerminalRun] = OrderedDict()

    def settings(self) -> ShellSettings:
        """``actions.shell``, read now (:class:`ShellRefused` 500 when invalid)."""
        try:
            return _settings(self._runtime)
        except AgentplugError as exc:
            raise ShellRefused(500, "bad_settings", f"invalid terminal settings: {exc}") from None

    @property
    def hub(self) -> OutputHub:
        """The ``terminal_output`` hub every run streams to."""
        return output_hub(self._runtime)

    def get(self, run_id: str) -> TerminalRun | None:
        """The run ``run_id`` (``None`` when unknown or forgotten)."""
        return self.runs.get(run_id)

    @property
    def active(self) -> int:
        """Commands still running."""
        return sum(1 for run in self.runs.values() if not run.finished)

    def start(
        self,
        command: str,
        *,
        cwd: str | None = None,
        timeout_s: float | None = None,
        run_id: str | None = None,
        source: str = "api",
    ) -> TerminalRun:
        """Check ``command`` against the operator's rules and start it; return the run.

        Needs a running event loop (the command is a task). Raises :class:`ShellRefused`.
        """
        settings = self.settings()
        if not settings.enabled:
            raise ShellRefused(
                403,
                "disabled",
                "the terminal is off: shell commands run only when the operator sets "
                "actions.shell.enabled to true in the config (it also enables SHELL_COMMAND)",
            )
        if not command.strip() or "\x00" in command:
            raise ShellRefused(400, "bad_command", "the command is empty or has a NUL byte")
        why = refusal(command, settings.allowed_commands)
        if why is not None:
            raise ShellRefused(403, "not_allowed", f"command refused by the allow-list: {why}")
        active = self.active
        if active >= settings.max_active_runs:
            raise ShellRefused(
                429,
                "busy",
                f"{active} terminal runs are still running (actions.shell.maxActiveRuns is "
                f"{settings.max_active_runs}); wait for one to finish",
            )
        self._check_cwd(cwd)
        run = TerminalRun(
            run_id or uuid.uuid4().hex,
            command,
            cwd,
            float(timeout_s if timeout_s is not None else settings.timeout_seconds),
            source,
        )
        if run.run_id in self.runs:
            raise ShellRefused(400, "bad_run_id", f"run {run.run_id!r} was already started")
        hub = self.hub
        try:
            hub.start(run.run_id, command)  # before the id is returned: a subscriber misses nothing
        except ValueError as exc:
            raise ShellRefused(400, "bad_run_id", str(exc)) from None
        self.runs[run.run_id] = run
        self._forget_old_runs()
        run.task = asyncio.get_running_loop().create_task(
            self._execute(run, hub, settings.max_output_bytes)
        )
        return run

    def _check_cwd(self, cwd: str | None) -> None:
        service: TerminalService | None = None
        if self.terminal is self.host_terminal:
            try:
                service = self.host_terminal.resolve()
            except (FileNotFoundError, AgentplugError) as exc:
                raise ShellRefused(
                    400, "no_working_directory", f"{exc} (set actions.shell.cwd in the config)"
                ) from None
        if cwd is None or not isinstance(service, LocalTerminalService):
            return
        root = service.working_dir
        target = (root / cwd).resolve()
        if not target.is_relative_to(root):
            raise ShellRefused(
                400, "bad_cwd", f"cwd {cwd!r} is outside the terminal's working directory {root}"
            )
        if not target.is_dir():
            raise ShellRefused(400, "bad_cwd", f"cwd {cwd!r} does not exist under {root}")

    async def _execute(self, run: TerminalRun, hub: OutputHub, max_output_bytes: int) -> None:
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
            run.failure = ("CancelledError", "cancelled: the host is shutting down")
            hub.finish(run.run_id, None, error=run.failure[1])
            raise
        except Exception as exc:  # the terminal refused or crashed: report, close the stream
            run.failure = (type(exc).__name__, str(exc))
            hub.finish(run.run_id, None, error=str(exc))
            log.warning("terminal run %s (%s) failed: %s", run.run_id, run.source, run.error)

    async def wait(self, run: TerminalRun, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for ``run`` to finish; ``True`` when it has."""
        if run.task is not None and not run.finished:
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(asyncio.shield(run.task), timeout_s)
        return run.finished

    def _forget_old_runs(self) -> None:
        excess = len(self.runs) - MAX_KEPT_RUNS
        for run_id in [k for k, r in self.runs.items() if r.finished][: max(0, excess)]:
            del self.runs[run_id]

    async def aclose(self) -> None:
        """Cancel the commands still running (their process groups are killed)."""
        tasks = [r.task for r in self.runs.values() if r.task is not None and not r.task.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


def terminal_runs(
    runtime: ShellRuntime,
    *,
    default_cwd: str | os.PathLike[str] | None = None,
    terminal: TerminalService | None = None,
) -> TerminalRuns:
    """The host's :class:`TerminalRuns` (created and registered on first use).

    ``default_cwd`` and ``terminal`` apply when it is created (``agentplug serve`` passes
    its state directory before anything else asks).
    """
    return get_or_register(
        runtime,
        RUNS_SERVICE,
        TerminalRuns,
        lambda: TerminalRuns(runtime, default_cwd=default_cwd, terminal=terminal),
    )


def still_running_text(run: TerminalRun, waited_s: float) -> str:
    """What a caller reports for a command still running after ``waited_s`` seconds."""
    return (
        f"Started run {run.run_id}; still running after {waited_s:g} s (time limit "
        f"{run.timeout_s:g} s). Follow its output on WS /api/terminal/runs/{run.run_id}/stream "
        f"or its status at GET /api/terminal/runs/{run.run_id}."
    )


def host_shell_backend(
    runtime: ShellRuntime,
) -> Callable[[ShellHandlerDef, Mapping[str, str], Collection[str]], Any]:
    """The ``shell`` back-end of custom actions on ``host``: the rendered command goes
    through the host's :class:`TerminalRuns` (switch, allow-list, terminal, hub)."""

    async def shell(
        defn: ShellHandlerDef, params: Mapping[str, str], declared: Collection[str]
    ) -> HandlerOutput:
        try:
            command = render_command(defn.command, params, declared)
        except ShellTemplateError as exc:
            return HandlerOutput(ok=False, output=f"Refused: {exc}")
        runs = terminal_runs(runtime)
        try:
            settings = runs.settings()
            run = runs.start(command, source="custom action")
        except ShellRefused as exc:
            return HandlerOutput(ok=False, output=f"Refused: {exc}")
        if not await runs.wait(run, settings.reply_after_seconds):
            return HandlerOutput(
                ok=True, output=still_running_text(run, settings.reply_after_seconds)
            )
        if run.result is None:
            message = run.failure[1] if run.failure else "no result"
            return HandlerOutput(ok=False, output=f"Action failed: {message}")
        return shell_output(run.result, run.timeout_s, settings.max_output_bytes)

    return shell
