"""Issue 13.7: the deprecated approval ``timeout_behavior`` warns once per plugin."""

from __future__ import annotations

import asyncio
import warnings
from typing import Any

from agentplug import PluginApi, PluginHost
from agentplug.services.approvals import ApprovalBroker, ScriptedResolver
from agentplug.services.toolcalls import ToolCallGate


def _asks(plugin_timeout_behavior: str | None) -> Any:
    def register(api: PluginApi) -> None:
        def ask(event: Any) -> dict[str, Any]:
            request: dict[str, Any] = {"title": "Run it", "description": "runs a tool"}
            if plugin_timeout_behavior is not None:
                request["timeout_behavior"] = plugin_timeout_behavior
            return {"require_approval": request}

        api.on("before_tool_call", ask)

    return register


def _run_calls(host: PluginHost, n: int) -> list[warnings.WarningMessage]:
    gate = ToolCallGate(
        host, host.gateway.policies, ApprovalBroker(ScriptedResolver(default="allow-once"))
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(n):
            asyncio.run(gate.check({"tool_name": "web_search", "params": {}}))
    return [w for w in caught if issubclass(w.category, DeprecationWarning)]


def test_approval_timeout_behavior_warns_once_per_plugin_naming_the_replacement() -> None:
    host = PluginHost()
    host.register(_asks("allow"), "old-approver")
    caught = _run_calls(host, 3)
    messages = [str(w.message) for w in caught if "timeout_behavior" in str(w.message)]
    assert len(messages) == 1
    assert "old-approver" in messages[0]
    assert "timeout_ms" in messages[0] and "deny" in messages[0]


def test_approval_without_timeout_behavior_does_not_warn() -> None:
    host = PluginHost()
    host.register(_asks(None), "new-approver")
    assert not [w for w in _run_calls(host, 2) if "timeout_behavior" in str(w.message)]
