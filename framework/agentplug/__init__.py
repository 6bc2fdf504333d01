"""agentplug: a pluggy-based plugin framework for AI agent gateways.

Plugin authors::

    from agentplug import hookimpl

    @hookimpl(priority=50)
    async def before_tool_call(event, ctx):
        if event.tool_name == "web_search":
            return {"require_approval": {"title": "Run web search", "description": "..."}}

Hosts::

    gateway = agentplug.Gateway.from_config("agentplug.json", load_plugins=True)
    await gateway.start()
    result = await gateway.runner.handle_inbound({"content": "hi", "sender_id": "u1"})

This module is the front door: the names plugin authors and hosts use. The public
subpackages are :mod:`agentplug.testing` (pytest fixtures, scenarios),
:mod:`agentplug.actions` (the action model, custom actions), :mod:`agentplug.agent`
(model providers, tools, MCP), :mod:`agentplug.store` (state stores) and
:mod:`agentplug.adapters` (PydanticAI, LangChain); the contract's types live in
:mod:`agentplug_hookspecs`. Everything else is private to the framework.

(PYTEST_DONT_REWRITE: the pytest plugin ships in this distribution; the runtime itself
has no test assertions to rewrite.)
"""

from __future__ import annotations

import importlib
import warnings
from typing import TYPE_CHECKING, Any

from agentplug.core.errors import (
    AgentplugError,
    ConfigError,
    DuplicatePluginError,
    HookSignatureError,
    PluginLoadError,
    UnknownHookError,
)
from agentplug.core.markers import hookimpl

__version__ = "0.1.0"

# The front door loads on first use: plugin modules only need ``hookimpl`` at import time
# (pluggy, no pydantic model), and pytest imports ``agentplug.testing.pytest_plugin`` in
# every session of an environment where agentplug is installed. ``tests/test_startup.py``
# holds the list of what ``import agentplug`` loads.
_LAZY = {
    "PluginHost": "agentplug.gateway.assembly",
    "PluginApi": "agentplug.gateway.assembly",
    "PluginRecord": "agentplug.core.records",
    "Gateway": "agentplug.gateway.assembly",
    "AgentplugConfig": "agentplug.config.model",
    "load_config": "agentplug.config.model",
    "DispatchResult": "agentplug.core.results",
    "HandlerReport": "agentplug.core.results",
    "HandlerStatus": "agentplug.core.results",
    "AgentRunner": "agentplug.agent.runner",
    "InboundMessage": "agentplug.agent.turn",
    "TurnResult": "agentplug.agent.turn",
    "ScriptedProvider": "agentplug.agent.providers.scripted",
    "ToolCallPipeline": "agentplug.agent.pipeline",
    "ApprovalBroker": "agentplug.services.approvals.broker",
    "AbortController": "agentplug.services.signals",
    "AbortSignal": "agentplug.services.signals",
    "Action": "agentplug.actions.model",
    "ActionParameter": "agentplug.actions.model",
    "ActionResult": "agentplug.actions.model",
    "StateStoreUnavailable": "agentplug.store",
}

# Names the root exported before the front door shrank: they still import, with a
# DeprecationWarning naming where they live now (CHANGELOG.md lists every move).
_MOVED = {
    "Context": ("agentplug_hookspecs", "agentplug_hookspecs"),
    "Event": ("agentplug_hookspecs", "agentplug_hookspecs"),
    "FailurePolicy": ("agentplug_hookspecs", "agentplug_hookspecs"),
    "HookDecl": ("agentplug_hookspecs", "agentplug_hookspecs"),
    "HookKind": ("agentplug_hookspecs", "agentplug_hookspecs"),
    "Result": ("agentplug_hookspecs", "agentplug_hookspecs"),
    "declare": ("agentplug_hookspecs", "agentplug_hookspecs"),
    "HandlerOptions": ("agentplug.core.markers", "agentplug.hookimpl(priority=..., ...)"),
    "Message": ("agentplug.actions.model", "agentplug.actions"),
    "ActionRegistry": ("agentplug.actions.registry", "agentplug.actions"),
    "ActionConflictError": ("agentplug.actions.registry", "agentplug.actions"),
    "run_action_flow": ("agentplug.actions.flow", "agentplug.actions"),
    "FlowResult": ("agentplug.actions.flow", "agentplug.actions"),
    "DeterministicActionSelector": ("agentplug.actions.flow", "agentplug.actions"),
    "CustomActionDef": ("agentplug.actions.custom", "agentplug.actions"),
    "CustomActionServices": ("agentplug.actions.custom", "agentplug.actions"),
    "load_custom_actions": ("agentplug.actions.custom", "agentplug.actions"),
    "def_to_action": ("agentplug.actions.custom", "agentplug.actions"),
    "register_custom_action_live": ("agentplug.actions.custom", "agentplug.actions"),
    "build_test_handler": ("agentplug.actions.custom", "agentplug.actions"),
    "check_config": ("agentplug.actions.config_check", "agentplug.actions"),
    "TerminalRuns": ("agentplug.actions.builtins.comms", "gateway.terminal"),
    "MemoryStore": ("agentplug.store", "agentplug.store"),
    "SQLiteStore": ("agentplug.store", "agentplug.store"),
    "store_from_config": ("agentplug.store", "agentplug.store"),
    "ToolRegistry": ("agentplug.agent", "agentplug.agent"),
    "ModelProvider": ("agentplug.agent", "agentplug.agent"),
    "ModelRequest": ("agentplug.agent", "agentplug.agent"),
    "ModelResponse": ("agentplug.agent", "agentplug.agent"),
    "ProviderError": ("agentplug.agent", "agentplug.agent"),
    "ProviderRegistry": ("agentplug.agent", "agentplug.agent"),
    "OpenAIProvider": ("agentplug.agent", "agentplug.agent"),
    "McpServerConfig": ("agentplug.agent.mcp", "agentplug.agent"),
    "McpToolSource": ("agentplug.agent.mcp", "agentplug.agent"),
    "CallIds": ("agentplug.agent.pipeline", "agentplug.agent"),
    "GateBridge": ("agentplug.gateway.compat", "gateway.tool_calls (agentplug.ToolCallPipeline)"),
    "ReplyDispatcher": ("agentplug.services.replies", "gateway.replies"),
    "ScriptedResolver": ("agentplug.services.approvals", "agentplug.services.approvals"),
    "SyncHost": ("agentplug.core.sync", "host.sync"),
    "ConfigFileError": ("agentplug.config.model", "agentplug.ConfigError (its base)"),
    "DataFileError": ("agentplug.config.datafiles", "agentplug.AgentplugError (its base)"),
    "read_data_file": ("agentplug.config.datafiles", "agentplug.load_config"),
    "filter_exec_env": ("agentplug.security.execenv", "the resolve_exec_env hook"),
    "SSRFPolicy": ("agentplug.security.ssrf", "agentplug.actions"),
    "SSRFBlocked": ("agentplug.security.ssrf", "agentplug.actions"),
    "guarded_fetch": ("agentplug.security.ssrf", "agentplug.actions"),
    "SandboxBudget": ("agentplug.sandbox", "actions.code in the config"),
    "prepare_turn": ("agentplug.services.turns", "gateway.runner"),
    "guard_run": ("agentplug.services.turns", "gateway.runner"),
    "send_message": ("agentplug.services.turns", "gateway.replies"),
    "ShutdownFinalizer": ("agentplug.services.lifecycle", "gateway.stop()"),
    "CronService": ("agentplug.services.lifecycle", "gateway.cron"),
    "ClusterCron": ("agentplug.services.cron_cluster", "gateway.cron"),
    "CronLease": ("agentplug.services.cron_cluster", "gateway.cron"),
    "CronRun": ("agentplug.services.cron_cluster", "gateway.cron"),
    "CronTick": ("agentplug.services.cron_cluster", "gateway.cron"),
    "upstream_request_id_hash": ("agentplug.services.modelcalls", "the model_call_* hooks"),
}

if TYPE_CHECKING:
    from agentplug.actions.model import Action, ActionParameter, ActionResult
    from agentplug.agent.pipeline import ToolCallPipeline
    from agentplug.agent.providers.scripted import ScriptedProvider
    from agentplug.agent.runner import AgentRunner
    from agentplug.agent.turn import InboundMessage, TurnResult
    from agentplug.config.model import AgentplugConfig, load_config
    from agentplug.core.records import PluginRecord
    from agentplug.core.results import DispatchResult, HandlerReport, HandlerStatus
    from agentplug.gateway.assembly import Gateway, PluginApi, PluginHost
    from agentplug.services.approvals.broker import ApprovalBroker
    from agentplug.services.signals import AbortController, AbortSignal
    from agentplug.store import StateStoreUnavailable


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is not None:
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value
    moved = _MOVED.get(name)
    if moved is None:
        raise AttributeError(f"module 'agentplug' has no attribute {name!r}")
    where, instead = moved
    warnings.warn(
        f"agentplug.{name} is no longer part of the front door; use {instead} (see CHANGELOG.md)",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(where), name)


def __dir__() -> list[str]:
    return sorted(__all__)


__all__ = [
    "AbortController",
    "AbortSignal",
    "Action",
    "ActionParameter",
    "ActionResult",
    "AgentRunner",
    "AgentplugConfig",
    "AgentplugError",
    "ApprovalBroker",
    "ConfigError",
    "DispatchResult",
    "DuplicatePluginError",
    "Gateway",
    "HandlerReport",
    "HandlerStatus",
    "HookSignatureError",
    "InboundMessage",
    "PluginApi",
    "PluginHost",
    "PluginLoadError",
    "PluginRecord",
    "ScriptedProvider",
    "StateStoreUnavailable",
    "ToolCallPipeline",
    "TurnResult",
    "UnknownHookError",
    "__version__",
    "hookimpl",
    "load_config",
]
