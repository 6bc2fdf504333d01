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
"""

from __future__ import annotations

from agentplug_hookspecs import (
    Context,
    Event,
    FailurePolicy,
    HookDecl,
    HookKind,
    Result,
    declare,
)

from .config import AgentplugConfig, load_config
from .dispatch import DispatchResult, HandlerReport, HandlerStatus
from .errors import (
    AgentplugError,
    ConfigError,
    DuplicatePluginError,
    HookSignatureError,
    PluginLoadError,
    UnknownHookError,
)
from .execenv import filter_exec_env
from .host import PluginApi, PluginHost, PluginRecord
from .markers import HandlerOptions, hookimpl

__version__ = "0.1.0"

__all__ = [
    "AgentplugConfig",
    "AgentplugError",
    "ConfigError",
    "Context",
    "DispatchResult",
    "DuplicatePluginError",
    "Event",
    "FailurePolicy",
    "HandlerOptions",
    "HandlerReport",
    "HandlerStatus",
    "HookDecl",
    "HookKind",
    "HookSignatureError",
    "PluginApi",
    "PluginHost",
    "PluginLoadError",
    "PluginRecord",
    "Result",
    "UnknownHookError",
    "__version__",
    "declare",
    "filter_exec_env",
    "hookimpl",
    "load_config",
]
