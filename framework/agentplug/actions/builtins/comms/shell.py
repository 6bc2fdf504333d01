"""The ``SHELL_COMMAND`` built-in and its operator settings (``actions.shell``)."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from agentplug.actions.builtins._shared import _params, _Section, _text_param
from agentplug.actions.builtins.comms.hub import _RUN_ID, output_hub
from agentplug.actions.model import (
    Action,
    ActionExample,
    ActionParameter,
    ActionResult,
    ActionRuntime,
    HandlerOptions,
    Message,
    ParameterSchema,
    State,
)
from agentplug.actions.registry import UNAVAILABLE
from agentplug.actions.terminal import LocalTerminalService, TerminalResult

if TYPE_CHECKING:
    from agentplug.actions.runtime import AgentRuntime


TERMINAL_SERVICE = "terminal"
SHELL_DISABLED = "shell disabled: set actions.shell.enabled = true"


class ShellSettings(_Section):
    """``actions.shell``."""

    enabled: bool = False
    """Off by default: running arbitrary commands from a conversation is an operator's
    explicit choice (``actions.shell.enabled: true``)."""
    cwd: str | None = None
    """Working directory (must exist); default: the state directory, else the current one."""
    timeout_seconds: float = Field(default=60.0, gt=0, le=24 * 3600)
    max_output_bytes: int = Field(default=64 * 1024, gt=0, le=64 * 1024 * 1024)


def _default_cwd(runtime: AgentRuntime, settings: ShellSettings) -> Path:
    if settings.cwd:
        return Path(settings.cwd)
    configured = runtime.host.config.runtime.state_dir
    if configured:
        return Path(configured)
    store_path = getattr(runtime.host.store, "path", None)
    if isinstance(store_path, Path):
        return store_path.parent
    return Path.cwd()


def _shell_action(runtime: AgentRuntime, settings: ShellSettings) -> Action:
    async def handler(
        rt: ActionRuntime, message: Message, state: State | None, options: HandlerOptions | None
    ) -> ActionResult:
        if not settings.enabled:
            return ActionResult.failure(
                "SHELL_COMMAND is disabled: no command was run. An operator enables it with "
                "actions.shell.enabled = true (and a working directory in actions.shell.cwd).",
                action="SHELL_COMMAND",
                reason="disabled",
            )
        params = _params(options)
        command = _text_param(params, "command")
        if command is None:
            return ActionResult.failure(
                "Missing required parameter: command (the shell command line to run).",
                action="SHELL_COMMAND",
            )
        terminal = rt.get_service(TERMINAL_SERVICE)
        if terminal is None:
            try:
                terminal = LocalTerminalService(_default_cwd(runtime, settings))
            except FileNotFoundError as exc:
                return ActionResult.failure(
                    f"SHELL_COMMAND cannot run: {exc} (set actions.shell.cwd).",
                    action="SHELL_COMMAND",
                    reason="no_working_directory",
                )
        run = getattr(terminal, "run", None)
        if not callable(run):
            return ActionResult.failure(
                f"The {TERMINAL_SERVICE!r} service ({type(terminal).__name__}) has no run() "
                "method; register an agentplug.actions.terminal.TerminalService.",
                action="SHELL_COMMAND",
                reason="bad_terminal_service",
            )
        hub = output_hub(rt)
        run_id = _text_param(params, "runId") or uuid.uuid4().hex
        try:
            hub.start(run_id, command)
        except ValueError as exc:
            return ActionResult.failure(f"SHELL_COMMAND: {exc}.", action="SHELL_COMMAND")
        try:
            result = await run(
                command,
                cwd=None,
                timeout_s=settings.timeout_seconds,
                max_output_bytes=settings.max_output_bytes,
                on_output=lambda text: hub.publish(run_id, text),
            )
        except Exception as exc:  # the terminal refused or crashed: say so, close the stream
            hub.finish(run_id, None, error=str(exc))
            return ActionResult.failure(
                f"SHELL_COMMAND could not run the command: {exc}",
                action="SHELL_COMMAND",
                run_id=run_id,
                error_type=type(exc).__name__,
            )
        if not isinstance(result, TerminalResult):
            result = TerminalResult.model_validate(result, from_attributes=True)
        hub.finish(run_id, result.exit_code)
        return _shell_result(run_id, result, settings)

    return Action(
        name="SHELL_COMMAND",
        similes=("RUN_COMMAND", "RUN_SHELL", "EXEC_COMMAND", "TERMINAL"),
        description="Run a shell command line in the operator's working directory through "
        "the terminal service and report its exit code and output (output is also streamed "
        "live to subscribers).",
        handler=handler,
        parameters=(
            ActionParameter(
                name="command", description="the shell command line to run", required=True
            ),
            ActionParameter(
                name="runId",
                description="optional id for the run, to subscribe to its output stream first",
                schema=ParameterSchema(type="string", pattern=_RUN_ID.pattern),
            ),
        ),
        examples=(
            (
                ActionExample(name="user", text="run `ls -la` in the workspace"),
                ActionExample(name="agent", text="Exit code 0.", actions=["SHELL_COMMAND"]),
            ),
        ),
        metadata={} if settings.enabled else {UNAVAILABLE: SHELL_DISABLED},
    )


def _shell_result(run_id: str, result: TerminalResult, settings: ShellSettings) -> ActionResult:
    data = {
        "run_id": run_id,
        "exit_code": result.exit_code,
        "output": result.output,
        "truncated": result.truncated,
        "timed_out": result.timed_out,
    }
    notes = []
    if result.truncated:
        notes.append(f"output truncated at {settings.max_output_bytes} bytes")
    if result.timed_out:
        head = f"Command killed after {settings.timeout_seconds:g} s (time limit)."
    else:
        head = f"Exit code {result.exit_code}."
    if notes:
        head += f" ({'; '.join(notes)})"
    text = f"{head}\n{result.output}" if result.output else head
    success = not result.timed_out and result.exit_code == 0
    return ActionResult(success=success, text=text, data=data)
