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

from agentplug.core.errors import (
    AgentplugError,
    ConfigError,
    DuplicatePluginError,
    HookSignatureError,
    PluginLoadError,
    UnknownHookError,
)
from agentplug.core.markers import HandlerOptions, hookimpl
from agentplug.core.services import wire_outcome_filter, wire_service

# The composition root: the core resolves these services and filters by name, so that
# it never imports a layer above it (see agentplug.core.services and CONTRIBUTING.md).
wire_service("store", "agentplug.store:host_store")
wire_service("trusted_policies", "agentplug.services.policies:TrustedToolPolicies")
wire_service("sessions", "agentplug.services.sessions:SessionServices")
wire_service("actions", "agentplug.actions.builtins:action_runtime")
wire_service("plugin_sources", "agentplug.plugins.ejected:PluginSources")
wire_outcome_filter("exec_env", "agentplug.security.execenv:exec_env_outcome")

__version__ = "0.1.0"

# The contract's models, the runtime and the action APIs load on first use: plugin modules
# only need ``hookimpl`` at import time (pluggy, no pydantic model), and pytest imports
# ``agentplug.testing.pytest_plugin`` in every session of an environment where agentplug is
# installed. ``tests/test_startup.py`` holds the list of what ``import agentplug`` loads.
_LAZY = {
    "Context": "agentplug_hookspecs",
    "Event": "agentplug_hookspecs",
    "FailurePolicy": "agentplug_hookspecs",
    "HookDecl": "agentplug_hookspecs",
    "HookKind": "agentplug_hookspecs",
    "Result": "agentplug_hookspecs",
    "declare": "agentplug_hookspecs",
    "PluginHost": "agentplug.core.host",
    "PluginApi": "agentplug.core.host",
    "PluginRecord": "agentplug.core.host",
    "AgentplugConfig": "agentplug.core.config",
    "load_config": "agentplug.core.config",
    "DispatchResult": "agentplug.core.results",
    "HandlerReport": "agentplug.core.results",
    "HandlerStatus": "agentplug.core.results",
    "filter_exec_env": "agentplug.security.execenv",
    "Action": "agentplug.actions.model",
    "ActionParameter": "agentplug.actions.model",
    "ActionResult": "agentplug.actions.model",
    "Message": "agentplug.actions.model",
    "ActionRegistry": "agentplug.actions.registry",
    "ActionConflictError": "agentplug.actions.registry",
    "run_action_flow": "agentplug.actions.flow",
    "FlowResult": "agentplug.actions.flow",
    "DeterministicActionSelector": "agentplug.actions.flow",
    "prepare_turn": "agentplug.services.turns",
    "guard_run": "agentplug.services.turns",
    "send_message": "agentplug.services.turns",
    "ShutdownFinalizer": "agentplug.services.lifecycle",
    "CronService": "agentplug.services.lifecycle",
    "ClusterCron": "agentplug.services.cron_cluster",
    "CronLease": "agentplug.services.cron_cluster",
    "CronRun": "agentplug.services.cron_cluster",
    "CronTick": "agentplug.services.cron_cluster",
    "CustomActionDef": "agentplug.actions.custom",
    "CustomActionServices": "agentplug.actions.custom",
    "load_custom_actions": "agentplug.actions.custom",
    "def_to_action": "agentplug.actions.custom",
    "register_custom_action_live": "agentplug.actions.custom",
    "build_test_handler": "agentplug.actions.custom",
    "SSRFPolicy": "agentplug.security.ssrf",
    "SSRFBlocked": "agentplug.security.ssrf",
    "guarded_fetch": "agentplug.security.ssrf",
    "ApprovalBroker": "agentplug.services.approvals",
    "ScriptedResolver": "agentplug.services.approvals",
    "SyncHost": "agentplug.core.sync",
    "MemoryStore": "agentplug.store",
    "SQLiteStore": "agentplug.store",
    "StateStoreUnavailable": "agentplug.store",
    "store_from_config": "agentplug.store",
    "ConfigFileError": "agentplug.core.config",
    "DataFileError": "agentplug.core.datafiles",
    "read_data_file": "agentplug.core.datafiles",
    "check_config": "agentplug.actions.config_check",
    "TerminalRuns": "agentplug.actions.builtins.comms",
    "SandboxBudget": "agentplug.sandbox",
    "upstream_request_id_hash": "agentplug.services.modelcalls",
    "AgentRunner": "agentplug.agent",
    "InboundMessage": "agentplug.agent",
    "TurnResult": "agentplug.agent",
    "ToolRegistry": "agentplug.agent",
    "ModelProvider": "agentplug.agent",
    "ModelRequest": "agentplug.agent",
    "ModelResponse": "agentplug.agent",
    "ProviderError": "agentplug.agent",
    "ProviderRegistry": "agentplug.agent",
    "ScriptedProvider": "agentplug.agent",
    "OpenAIProvider": "agentplug.agent",
    "ReplyDispatcher": "agentplug.services.replies",
    "GateBridge": "agentplug.agent.bridge",
    "CallIds": "agentplug.agent.bridge",
    "McpServerConfig": "agentplug.agent.mcp",
    "McpToolSource": "agentplug.agent.mcp",
}

if TYPE_CHECKING:
    from agentplug_hookspecs import (
        Context,
        Event,
        FailurePolicy,
        HookDecl,
        HookKind,
        Result,
        declare,
    )

    from agentplug.actions.builtins.comms import TerminalRuns
    from agentplug.actions.config_check import check_config
    from agentplug.actions.custom import (
        CustomActionDef,
        CustomActionServices,
        build_test_handler,
        def_to_action,
        load_custom_actions,
        register_custom_action_live,
    )
    from agentplug.actions.flow import DeterministicActionSelector, FlowResult, run_action_flow
    from agentplug.actions.model import Action, ActionParameter, ActionResult, Message
    from agentplug.actions.registry import ActionConflictError, ActionRegistry
    from agentplug.agent import (
        AgentRunner,
        InboundMessage,
        ModelProvider,
        ModelRequest,
        ModelResponse,
        OpenAIProvider,
        ProviderError,
        ProviderRegistry,
        ScriptedProvider,
        ToolRegistry,
        TurnResult,
    )
    from agentplug.agent.bridge import CallIds, GateBridge
    from agentplug.agent.mcp import McpServerConfig, McpToolSource
    from agentplug.core.config import AgentplugConfig, ConfigFileError, load_config
    from agentplug.core.datafiles import DataFileError, read_data_file
    from agentplug.core.host import PluginApi, PluginHost, PluginRecord
    from agentplug.core.results import DispatchResult, HandlerReport, HandlerStatus
    from agentplug.core.sync import SyncHost
    from agentplug.sandbox import SandboxBudget
    from agentplug.security.execenv import filter_exec_env
    from agentplug.security.ssrf import SSRFBlocked, SSRFPolicy, guarded_fetch
    from agentplug.services.approvals import ApprovalBroker, ScriptedResolver
    from agentplug.services.cron_cluster import ClusterCron, CronLease, CronRun, CronTick
    from agentplug.services.lifecycle import CronService, ShutdownFinalizer
    from agentplug.services.modelcalls import upstream_request_id_hash
    from agentplug.services.replies import ReplyDispatcher
    from agentplug.services.turns import guard_run, prepare_turn, send_message
    from agentplug.store import MemoryStore, SQLiteStore, StateStoreUnavailable, store_from_config


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
    "AgentRunner",
    "AgentplugConfig",
    "AgentplugError",
    "ApprovalBroker",
    "CallIds",
    "ClusterCron",
    "ConfigError",
    "ConfigFileError",
    "Context",
    "CronLease",
    "CronRun",
    "CronService",
    "CronTick",
    "CustomActionDef",
    "CustomActionServices",
    "DataFileError",
    "DeterministicActionSelector",
    "DispatchResult",
    "DuplicatePluginError",
    "Event",
    "FailurePolicy",
    "FlowResult",
    "GateBridge",
    "HandlerOptions",
    "HandlerReport",
    "HandlerStatus",
    "HookDecl",
    "HookKind",
    "HookSignatureError",
    "InboundMessage",
    "McpServerConfig",
    "McpToolSource",
    "MemoryStore",
    "Message",
    "ModelProvider",
    "ModelRequest",
    "ModelResponse",
    "OpenAIProvider",
    "PluginApi",
    "PluginHost",
    "PluginLoadError",
    "PluginRecord",
    "ProviderError",
    "ProviderRegistry",
    "ReplyDispatcher",
    "Result",
    "SQLiteStore",
    "SSRFBlocked",
    "SSRFPolicy",
    "SandboxBudget",
    "ScriptedProvider",
    "ScriptedResolver",
    "ShutdownFinalizer",
    "StateStoreUnavailable",
    "SyncHost",
    "TerminalRuns",
    "ToolRegistry",
    "TurnResult",
    "UnknownHookError",
    "__version__",
    "build_test_handler",
    "check_config",
    "declare",
    "def_to_action",
    "filter_exec_env",
    "guard_run",
    "guarded_fetch",
    "hookimpl",
    "load_config",
    "load_custom_actions",
    "prepare_turn",
    "read_data_file",
    "register_custom_action_live",
    "run_action_flow",
    "send_message",
    "store_from_config",
    "upstream_request_id_hash",
]
