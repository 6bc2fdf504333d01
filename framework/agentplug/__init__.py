"""agentplug: a pluggy-based plugin framework for AI agent gateways.

Plugin authors::

    from agentplug import hookimpl

    @hookimpl(priority=50)
    async def before_tool_call(event, ctx):
        if event.tool_name == "web_search":
            return {"require_approval": {"title": "Run web search", "description": "..."}}

Hosts::

    host = agentplug.PluginHost(config)
    host.load_installed()
    result = await host.hooks.before_tool_call({"tool_name": "exec", "params": {...}})

(PYTEST_DONT_REWRITE: the pytest plugin ships in this distribution; the runtime itself
has no test assertions to rewrite.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agentplug_hookspecs import (
    Context,
    Event,
    FailurePolicy,
    HookDecl,
    HookKind,
    Result,
    declare,
)

from .errors import (
    AgentplugError,
    ConfigError,
    DuplicatePluginError,
    HookSignatureError,
    PluginLoadError,
    UnknownHookError,
)
from .markers import HandlerOptions, hookimpl

__version__ = "0.1.0"

# The runtime and the action APIs load on first use: plugin modules only need
# ``hookimpl`` at import time, and pytest imports ``agentplug.pytest_plugin`` in every
# session of an environment where agentplug is installed.
_LAZY = {
    "PluginHost": "agentplug.host",
    "PluginApi": "agentplug.host",
    "PluginRecord": "agentplug.host",
    "AgentplugConfig": "agentplug.config",
    "load_config": "agentplug.config",
    "DispatchResult": "agentplug.dispatch",
    "HandlerReport": "agentplug.dispatch",
    "HandlerStatus": "agentplug.dispatch",
    "filter_exec_env": "agentplug.execenv",
    "Action": "agentplug.actions.model",
    "ActionParameter": "agentplug.actions.model",
    "ActionResult": "agentplug.actions.model",
    "Message": "agentplug.actions.model",
    "ActionRegistry": "agentplug.actions.registry",
    "ActionConflictError": "agentplug.actions.registry",
    "run_action_flow": "agentplug.actions.flow",
    "FlowResult": "agentplug.actions.flow",
    "CustomActionDef": "agentplug.actions.custom",
    "CustomActionServices": "agentplug.actions.custom",
    "load_custom_actions": "agentplug.actions.custom",
    "def_to_action": "agentplug.actions.custom",
    "register_custom_action_live": "agentplug.actions.custom",
    "build_test_handler": "agentplug.actions.custom",
    "SSRFPolicy": "agentplug.security.ssrf",
    "SSRFBlocked": "agentplug.security.ssrf",
    "guarded_fetch": "agentplug.security.ssrf",
    "ApprovalBroker": "agentplug.approvals",
    "ScriptedResolver": "agentplug.approvals",
    "SyncHost": "agentplug.sync",
    "MemoryStore": "agentplug.store",
    "SQLiteStore": "agentplug.store",
}

if TYPE_CHECKING:
    from .actions.custom import (
        CustomActionDef,
        CustomActionServices,
        build_test_handler,
        def_to_action,
        load_custom_actions,
        register_custom_action_live,
    )
    from .actions.flow import FlowResult, run_action_flow
    from .actions.model import Action, ActionParameter, ActionResult, Message
    from .actions.registry import ActionConflictError, ActionRegistry
    from .approvals import ApprovalBroker, ScriptedResolver
    from .config import AgentplugConfig, load_config
    from .dispatch import DispatchResult, HandlerReport, HandlerStatus
    from .execenv import filter_exec_env
    from .host import PluginApi, PluginHost, PluginRecord
    from .security.ssrf import SSRFBlocked, SSRFPolicy, guarded_fetch
    from .store import MemoryStore, SQLiteStore
    from .sync import SyncHost


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agentplug' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "Action",
    "ActionConflictError",
    "ActionParameter",
    "ActionRegistry",
    "ActionResult",
    "AgentplugConfig",
    "AgentplugError",
    "ApprovalBroker",
    "ConfigError",
    "Context",
    "CustomActionDef",
    "CustomActionServices",
    "DispatchResult",
    "DuplicatePluginError",
    "Event",
    "FailurePolicy",
    "FlowResult",
    "HandlerOptions",
    "HandlerReport",
    "HandlerStatus",
    "HookDecl",
    "HookKind",
    "HookSignatureError",
    "MemoryStore",
    "Message",
    "PluginApi",
    "PluginHost",
    "PluginLoadError",
    "PluginRecord",
    "Result",
    "SQLiteStore",
    "SSRFBlocked",
    "SSRFPolicy",
    "ScriptedResolver",
    "SyncHost",
    "UnknownHookError",
    "__version__",
    "build_test_handler",
    "declare",
    "def_to_action",
    "filter_exec_env",
    "guarded_fetch",
    "hookimpl",
    "load_config",
    "load_custom_actions",
    "register_custom_action_live",
    "run_action_flow",
]
