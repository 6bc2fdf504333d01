"""tool-preflight: the seed's quick-start plugin, in Python.

Registered imperatively (``register(api)`` + ``api.on``) with priority 50, so it runs before
default-priority ``before_tool_call`` handlers:

- a ``web_search`` call pauses for approval ("Run web search", severity ``info``, 60 s);
- a tool named in ``plugins.entries.tool-preflight.config.blocked_tools`` is blocked.

``before_tool_call`` fails closed, so a misconfigured ``blocked_tools`` blocks every call
with a reason that names the setting instead of letting calls through unchecked.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from agentplug import PluginApi
from agentplug_hookspecs.tools import ApprovalRequest, ToolCallEvent, ToolCallResult

__all__ = [
    "APPROVAL_TIMEOUT_MS",
    "MAX_QUERY_CHARS",
    "PLUGIN_ID",
    "PRIORITY",
    "preflight",
    "register",
]

PLUGIN_ID = "tool-preflight"
PRIORITY = 50
"""Higher than the default (0): decide before ordinary handlers rewrite the call."""
APPROVAL_TIMEOUT_MS = 60_000
"""How long the approver has; an unanswered approval denies the call."""
MAX_QUERY_CHARS = 2_000
"""Longer queries are shortened in the approval text (the request caps it at 4 000)."""

log = logging.getLogger(f"agentplug.plugin.{PLUGIN_ID}")


class ConfigurationError(ValueError):
    """``blocked_tools`` is not a list of tool names."""


def _blocked_tools(config: Mapping[str, Any]) -> frozenset[str]:
    raw = config.get("blocked_tools", [])
    if isinstance(raw, str) or not isinstance(raw, list | tuple):
        raise ConfigurationError("blocked_tools must be a list of tool names")
    if not all(isinstance(name, str) and name for name in raw):
        raise ConfigurationError("blocked_tools must contain only non-empty tool names")
    # Casefolded: a tool must not slip through because of its spelling.
    return frozenset(name.casefold() for name in raw)


def _describe_query(params: Mapping[str, Any]) -> str:
    query = params.get("query")
    text = "" if query is None else str(query)
    if len(text) > MAX_QUERY_CHARS:
        text = text[: MAX_QUERY_CHARS - 1] + "\u2026"
    return f"Allow search query: {text}"


async def preflight(event: ToolCallEvent) -> ToolCallResult | None:
    """Block operator-listed tools; ask for approval before ``web_search``."""
    try:
        blocked = _blocked_tools(event.context.plugin_config)
    except ConfigurationError as exc:
        setting = f"plugins.entries.{PLUGIN_ID}.config.blocked_tools"
        log.error("%s: %s; blocking tool calls until it is fixed", setting, exc)
        return ToolCallResult(
            block=True,
            block_reason=f"{PLUGIN_ID} is misconfigured ({setting}: {exc}); tool calls are "
            "blocked until an operator fixes it",
        )
    if event.tool_name.casefold() in blocked:
        return ToolCallResult(
            block=True,
            block_reason=f"tool {event.tool_name!r} is blocked by the operator "
            f"(plugins.entries.{PLUGIN_ID}.config.blocked_tools)",
        )
    if event.tool_name != "web_search":
        return None
    return ToolCallResult(
        require_approval=ApprovalRequest(
            title="Run web search",
            description=_describe_query(event.params),
            severity="info",
            timeout_ms=APPROVAL_TIMEOUT_MS,
        )
    )


def register(api: PluginApi) -> None:
    """Entry point: hook ``before_tool_call`` at priority 50 (seed style)."""
    api.on("before_tool_call", preflight, priority=PRIORITY)
