"""Communication built-ins (ACTIONS.md §4): ``MESSAGE``, ``SHELL_COMMAND`` and ``LOG_LEVEL``.

``MESSAGE`` (``text``, ``targetType`` = ``user`` | ``room``, ``source``, ``target``)
    Looks the service called ``source`` up in the runtime's service registry
    (``runtime.get_service(source)``); it must implement :class:`MessagingService`
    (``send_to_user`` / ``send_to_room``). An unknown service, a service that cannot send to
    the requested target type, or a failed send is a failed result saying which.

``SHELL_COMMAND`` (``command``, optional ``runId``)
    Runs the command through the host's :class:`TerminalRuns` (service ``terminal_runs``,
    shared with custom shell actions and the control API's terminal): the ``terminal``
    service (a host replacement, or by default a
    :class:`~agentplug.actions.terminal.LocalTerminalService` rooted at ``actions.shell.cwd``,
    else the state directory, else the current directory), with a time limit, bounded
    output, the allow-list ``actions.shell.allowedCommands`` and a cap on commands running at
    once. Output chunks are published, as they arrive, on the :class:`OutputHub` service
    ``terminal_output``; ``WS /api/terminal/runs/{id}/stream`` streams them with
    ``async for chunk in hub.subscribe(run_id)``. The result carries the run id, the exit
    code and the (bounded) output; a command still running after
    ``actions.shell.replyAfterSeconds`` is reported at once with its run id and ``status:
    "running"``, and goes on. ``actions.shell.enabled: false`` refuses every command.

``LOG_LEVEL`` (``level`` = ``trace`` | ``debug`` | ``info`` | ``warn`` | ``error``, or
``reset``)
    Sets the log level of the current room only (``message.room_id``) in the
    :class:`RoomLogLevels` service ``log_levels``. Records carrying a ``room_id`` (logged with
    ``extra={"room_id": ...}`` or through :func:`room_logger`) are filtered by
    :class:`RoomLevelFilter` with their room's level; other rooms keep theirs.

Operator settings (``actions.shell``)::

    {"actions": {"shell": {"enabled": true, "cwd": "/srv/agent/work",
                           "timeoutSeconds": 60, "maxOutputBytes": 65536,
                           "allowedCommands": ["ls", "git"], "replyAfterSeconds": 10,
                           "maxActiveRuns": 8}}}

Invalid settings raise :class:`~agentplug.core.errors.ConfigError` naming ``actions.shell.<key>``
when the built-ins are registered (``await host.actions.load()``).

The package is split by job: :mod:`.message` (``MESSAGE``), :mod:`.hub` (:class:`OutputHub`),
:mod:`.runs` (:class:`TerminalRuns`), :mod:`.settings` (:class:`ShellSettings`),
:mod:`.shell` (``SHELL_COMMAND``) and :mod:`.log_levels`
(``LOG_LEVEL`` and the per-room levels); this module holds the entry point.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from agentplug.actions.builtins._shared import load_settings
from agentplug.actions.builtins.comms.hub import (
    OUTPUT_HUB_SERVICE,
    OutputChunk,
    OutputHub,
    RunStatus,
    output_hub,
)
from agentplug.actions.builtins.comms.log_levels import (
    LEVELS,
    LOG_LEVELS_SERVICE,
    TRACE,
    RoomLevelFilter,
    RoomLogLevels,
    log_level_action,
    room_log_levels,
    room_logger,
)
from agentplug.actions.builtins.comms.message import MessagingService, message_action
from agentplug.actions.builtins.comms.runs import (
    RUNS_SERVICE,
    HostTerminal,
    ShellRefused,
    TerminalRun,
    TerminalRuns,
    terminal_runs,
)
from agentplug.actions.builtins.comms.settings import ShellSettings
from agentplug.actions.builtins.comms.shell import TERMINAL_SERVICE, shell_action
from agentplug.actions.model import Action

if TYPE_CHECKING:
    from agentplug.actions.runtime import AgentRuntime

__all__ = [
    "LEVELS",
    "LOG_LEVELS_SERVICE",
    "OUTPUT_HUB_SERVICE",
    "RUNS_SERVICE",
    "TERMINAL_SERVICE",
    "TRACE",
    "HostTerminal",
    "MessagingService",
    "OutputChunk",
    "OutputHub",
    "RoomLevelFilter",
    "RoomLogLevels",
    "RunStatus",
    "ShellRefused",
    "ShellSettings",
    "TerminalRun",
    "TerminalRuns",
    "builtin_actions",
    "load_settings",
    "output_hub",
    "room_log_levels",
    "room_logger",
    "terminal_runs",
]

log = logging.getLogger("agentplug.builtins.comms")


def builtin_actions(runtime: AgentRuntime) -> list[Action]:
    """``MESSAGE``, ``SHELL_COMMAND`` and ``LOG_LEVEL``; registers the hub and level services.

    Raises :class:`ConfigError` when ``actions.shell`` is invalid.
    """
    shell = load_settings(runtime.host.config.actions, "shell", ShellSettings)
    output_hub(runtime)
    room_log_levels(runtime)
    return [message_action(), shell_action(runtime, shell), log_level_action()]
