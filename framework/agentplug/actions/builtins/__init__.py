"""Built-in actions (ACTIONS.md §4), shipped as a bundled plugin, each disableable.

:class:`BuiltinActions` is an ordinary plugin (id ``builtin``) that answers
``provide_actions``, the way pytest and llm ship their own features as plugins of their
own manager: the built-ins reach the registry through the same hook, clash rules and
listing as any plugin's actions. ``actions.disabled`` in the operator config lists
built-in names that must not be registered (``{"actions": {"disabled":
["SHELL_COMMAND"]}}``); they are listed as disabled.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentplug.actions.model import Action
from agentplug.actions.runtime import AgentRuntime
from agentplug.core.errors import ConfigError
from agentplug.core.markers import hookimpl

if TYPE_CHECKING:
    from agentplug.core.host import HookHost
    from agentplug.store import StateStore

__all__ = ["BUILTIN_PLUGIN_ID", "BuiltinActions", "action_runtime"]

log = logging.getLogger("agentplug.builtins")

BUILTIN_PLUGIN_ID = "builtin"
"""The plugin id of the built-in actions (their owner in the registry)."""


def _builtin_actions(runtime: AgentRuntime) -> list[Action]:
    # Imported here: each module builds its actions from the runtime, and the action
    # runtime itself must not load them before a gateway asks.
    from agentplug.actions.builtins import comms, lifecycle, media, plugins

    found: list[Action] = []
    for module in (lifecycle, plugins, comms, media):
        found += module.builtin_actions(runtime)
    return found


class BuiltinActions:
    """The framework's own actions as a bundled plugin (see the module docstring).

    The actions are built once, at the first ``provide_actions``; invalid ``actions.*``
    settings are recorded on the runtime (``builtin_error``), which raises them from
    ``load()``.
    """

    plugin_id = BUILTIN_PLUGIN_ID
    name = "agentplug built-in actions"
    description = (
        "RESTART_AGENT, the plugin and core management actions, MESSAGE, SHELL_COMMAND "
        "and the media actions."
    )

    def __init__(self, runtime: AgentRuntime) -> None:
        self.runtime = runtime
        self._actions: list[Action] | None = None

    @hookimpl(priority=1_000)  # first: a plugin's action named like a built-in is the clash
    def provide_actions(self, event: Any, ctx: Any) -> list[Action]:
        runtime = self.runtime
        if self._actions is None:
            try:
                self._actions = _builtin_actions(runtime)
            except ConfigError as exc:
                runtime.builtin_error = exc
                raise
        disabled = {str(n).upper() for n in runtime.host.config.actions.get("disabled", [])}
        runtime.disabled_builtins = [a for a in self._actions if a.name.upper() in disabled]
        for action in runtime.disabled_builtins:
            log.info("built-in action %s disabled by actions.disabled", action.name)
        return [a for a in self._actions if a.name.upper() not in disabled]


def action_runtime(
    host: HookHost, store: StateStore, state_dir: Path | None = None
) -> AgentRuntime:
    """A gateway's action runtime, whose first ``load()`` registers the built-in actions
    on ``host`` as the bundled plugin ``builtin``."""
    runtime = AgentRuntime(host, store=store, state_dir=state_dir)
    runtime.use_builtins(BUILTIN_PLUGIN_ID, BuiltinActions(runtime))
    return runtime
