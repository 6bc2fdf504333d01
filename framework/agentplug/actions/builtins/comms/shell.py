"""The ``SHELL_COMMAND`` built-in; its settings are :class:`ShellSettings` (``actions.shell``).

The command runs through the host's :class:`~agentplug.actions.builtins.comms.runs.TerminalRuns`
(like the control API's terminal runs and custom shell actions): a command still running
after ``actions.shell.replyAfterSeconds`` is reported with its run id (``status:
"running"``) and goes on, streaming on ``WS /api/terminal/runs/{id}/stream``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agentplug.actions.builtins._shared import handler_params, text_param
from agentplug.actions.builtins.comms.hub import RUN_ID_PATTERN
from agentplug.actions.builtins.comms.runs import (
    TERMINAL_SERVICE,
    ShellRefused,
    TerminalRun,
    still_running_text,
    terminal_runs,
)
from agentplug.actions.builtins.comms.settings import ShellSettings
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
from agentplug.actions.terminal import TerminalResult

if TYPE_CHECKING:
    from agentplug.actions.runtime import AgentRuntime

__all__ = [
    "SHELL_DISABLED",
    "TERMINAL_SERVICE",
    "ShellSettings",
    "shell_action",
]

SHELL_DISABLED = "shell disabled: set actions.shell.enabled = true"


def shell_action(runtime: AgentRuntime, settings: ShellSettings) -> Action:
    """The ``SHELL_COMMAND`` action of ``runtime``, per ``actions.shell``."""

    # ``settings`` were validated at registration; each run reads them again (live config).
    async def handler(
        rt: ActionRuntime, message: Message, state: State | None, options: HandlerOptions | None
    ) -> ActionResult:
        runs = terminal_runs(runtime)
        try:
            current = runs.settings()
        except ShellRefused as exc:
            return ActionResult.failure(f"SHELL_COMMAND: {exc}", action="SHELL_COMMAND")
        if not current.enabled:
            return ActionResult.failure(
                "SHELL_COMMAND is disabled: no command was run. An operator enables it with "
                "actions.shell.enabled = true (and a working directory in actions.shell.cwd).",
                action="SHELL_COMMAND",
                reason="disabled",
            )
        params = handler_params(options)
        command = text_param(params, "command")
        if command is None:
            return ActionResult.failure(
                "Missing required parameter: command (the shell command line to run).",
                action="SHELL_COMMAND",
            )
        try:
            run = runs.start(command, run_id=text_param(params, "runId"), source="SHELL_COMMAND")
        except ShellRefused as exc:
            text = (
                f"SHELL_COMMAND cannot run: {exc}."
                if exc.reason == "no_working_directory"
                else f"SHELL_COMMAND: {exc}."
            )
            return ActionResult.failure(text, action="SHELL_COMMAND", reason=exc.reason)
        if not await runs.wait(run, current.reply_after_seconds):
            return ActionResult(
                success=True,
                text=still_running_text(run, current.reply_after_seconds),
                data={"run_id": run.run_id, "status": "running", "exit_code": None},
            )
        return _finished(run, current)

    return Action(
        name="SHELL_COMMAND",
        similes=("RUN_COMMAND", "RUN_SHELL", "EXEC_COMMAND", "TERMINAL"),
        description="Run a shell command line in the operator's working directory through "
        "the terminal service and report its exit code and output (output is also streamed "
        "live to subscribers).",
        handler=handler,
        side_effects=True,
        parameters=(
            ActionParameter(
                name="command", description="the shell command line to run", required=True
            ),
            ActionParameter(
                name="runId",
                description="optional id for the run, to subscribe to its output stream first",
                schema=ParameterSchema(type="string", pattern=RUN_ID_PATTERN.pattern),
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


def _finished(run: TerminalRun, settings: ShellSettings) -> ActionResult:
    if run.result is None:
        kind, message = run.failure or ("RuntimeError", "no result")
        return ActionResult.failure(
            f"SHELL_COMMAND could not run the command: {message}",
            action="SHELL_COMMAND",
            run_id=run.run_id,
            error_type=kind,
        )
    return _shell_result(run.run_id, run.result, run.timeout_s, settings)


def _shell_result(
    run_id: str, result: TerminalResult, timeout_s: float, settings: ShellSettings
) -> ActionResult:
    data = {
        "run_id": run_id,
        "status": "timed_out" if result.timed_out else "exited",
        "exit_code": result.exit_code,
        "output": result.output,
        "truncated": result.truncated,
        "timed_out": result.timed_out,
    }
    notes = []
    if result.truncated:
        notes.append(f"output truncated at {settings.max_output_bytes} bytes")
    if result.timed_out:
        head = f"Command killed after {timeout_s:g} s (time limit)."
    else:
        head = f"Exit code {result.exit_code}."
    if notes:
        head += f" ({'; '.join(notes)})"
    text = f"{head}\n{result.output}" if result.output else head
    success = not result.timed_out and result.exit_code == 0
    return ActionResult(success=success, text=text, data=data)
