"""Built-in actions (ACTIONS.md §4), registered automatically, each disableable.

Each module of this package exposes ``builtin_actions(runtime) -> list[Action]``.
``actions.disabled`` in the operator config lists built-in names that must not be
registered (``{"actions": {"disabled": ["SHELL_COMMAND"]}}``).
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from agentplug.actions.runtime import AgentRuntime

if TYPE_CHECKING:
    from agentplug.core.host import HookHost
    from agentplug.store import StateStore

__all__ = ["BUILTIN_MODULES", "action_runtime", "register_builtins"]

log = logging.getLogger("agentplug.builtins")

BUILTIN_MODULES = (
    "agentplug.actions.builtins.lifecycle",
    "agentplug.actions.builtins.plugins",
    "agentplug.actions.builtins.comms",
    "agentplug.actions.builtins.media",
)
OWNER = "builtin"


def register_builtins(runtime: AgentRuntime) -> list[str]:
    """Register every enabled built-in action; return the registered names."""
    settings = runtime.host.config.actions
    disabled = {str(n).upper() for n in settings.get("disabled", [])}
    registered: list[str] = []
    for module_name in BUILTIN_MODULES:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue
        for action in module.builtin_actions(runtime):
            if action.name.upper() in disabled:
                log.info("built-in action %s disabled by actions.disabled", action.name)
                runtime.disabled_builtins.append(action)
                continue
            runtime.registry.register(action, OWNER)
            registered.append(action.name)
    return registered


def action_runtime(
    host: HookHost, store: StateStore, state_dir: Path | None = None
) -> AgentRuntime:
    """A gateway's action runtime: an :class:`AgentRuntime` with the built-ins."""
    return AgentRuntime(host, store=store, state_dir=state_dir, builtins=register_builtins)
