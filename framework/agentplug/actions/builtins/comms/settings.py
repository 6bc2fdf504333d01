"""The operator's shell settings (``actions.shell``), shared by every way a command runs.

``SHELL_COMMAND``, custom actions with a ``shell`` handler and the control API's
``POST /api/terminal/run`` all go through the host's
:class:`~agentplug.actions.builtins.comms.runs.TerminalRuns`, which reads these settings.
"""

from __future__ import annotations

from pydantic import Field

from agentplug.actions.builtins._shared import SettingsSection

__all__ = ["DEFAULT_MAX_ACTIVE_RUNS", "ShellSettings"]

DEFAULT_MAX_ACTIVE_RUNS = 8
"""Commands running at once when ``actions.shell.maxActiveRuns`` is not set."""


class ShellSettings(SettingsSection):
    """``actions.shell``."""

    enabled: bool = False
    """Off by default: running arbitrary commands from a conversation is an operator's
    explicit choice (``actions.shell.enabled: true``)."""
    cwd: str | None = None
    """Working directory (must exist); default: the state directory, else the current one."""
    timeout_seconds: float = Field(default=60.0, gt=0, le=24 * 3600)
    """Time limit of a command started by ``SHELL_COMMAND`` or a custom action."""
    max_output_bytes: int = Field(default=64 * 1024, gt=0, le=64 * 1024 * 1024)
    allowed_commands: list[str] = Field(default_factory=list)
    """When non-empty, only command lines whose every command starts with one of these
    programs run (see :mod:`agentplug.security.commands`)."""
    reply_after_seconds: float = Field(default=10.0, gt=0, le=24 * 3600)
    """How long ``SHELL_COMMAND`` and custom shell actions wait for the command to end;
    a command still running then is reported with its run id and keeps running, its
    output streamed (``WS /api/terminal/runs/{id}/stream``)."""
    max_active_runs: int = Field(default=DEFAULT_MAX_ACTIVE_RUNS, ge=1, le=1024)
    """Commands running at once, whoever started them; more are refused (429 in the API)."""
