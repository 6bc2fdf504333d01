"""What earlier releases offered keeps working for one release, with a DeprecationWarning
that names the replacement (CHANGELOG.md, "Deprecated")."""

from __future__ import annotations

import asyncio
from typing import Any

import agentplug
import pytest
from agentplug import Gateway, PluginHost
from agentplug.store import MemoryStore


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("store", "store"),
        ("sessions", "sessions"),
        ("actions", "actions"),
        ("trusted_policies", "policies"),
        ("state_dir", "state_dir"),
    ],
)
def test_a_host_shortcut_still_answers_with_the_gateways_part_and_names_it(
    old: str, new: str
) -> None:
    host = PluginHost(store=MemoryStore())
    with pytest.warns(DeprecationWarning, match=rf"host\.{old} is deprecated; use gateway\.{new}"):
        value = getattr(host, old)
    assert value is getattr(host.gateway, new)


def test_a_runner_built_on_a_host_warns_and_runs_on_the_hosts_gateway() -> None:
    host = PluginHost(store=MemoryStore())
    with pytest.warns(DeprecationWarning, match=r"AgentRunner\(host, \.\.\.\) is deprecated"):
        runner = agentplug.AgentRunner(host, agentplug.ScriptedProvider(["hi"]))
    assert runner.pipeline.gate is host.gateway.tool_calls.gate
    assert asyncio.run(runner.run_turn("hello", session_key="s")).reply == "hi"


def test_gate_bridge_warns_and_runs_the_call_through_the_gateways_pipeline() -> None:
    host = PluginHost(store=MemoryStore())
    ran: list[dict[str, Any]] = []

    def block_exec(event: Any, ctx: Any) -> dict[str, Any] | None:
        return {"block": True, "block_reason": "no exec"} if event.tool_name == "exec" else None

    def register(api: agentplug.PluginApi) -> None:
        api.on("before_tool_call", block_exec)

    host.register(register, "guard")
    with pytest.warns(DeprecationWarning, match="GateBridge is deprecated"):
        bridge_class = agentplug.GateBridge
        bridge = bridge_class(host)
    allowed = asyncio.run(bridge.call("read", {"path": "a"}, lambda p: ran.append(p) or "ok"))
    blocked = asyncio.run(bridge.call("exec", {"cmd": "ls"}, lambda p: ran.append(p) or "ok"))
    assert allowed.allowed and allowed.output.content == "ok"
    assert not blocked.allowed and blocked.output.content == "tool call blocked: no exec"
    assert ran == [{"path": "a"}]


def test_a_plugin_registered_on_a_bare_hook_host_is_told_it_needs_a_gateway() -> None:
    from agentplug.core.host import HookHost

    def register(api: Any) -> None:
        api.session  # noqa: B018  (the attribute access is the point)

    with pytest.raises(agentplug.PluginLoadError, match="needs the gateway's services"):
        HookHost().register(register, "wants-sessions")


def test_a_gateway_built_from_a_hosts_config_is_that_hosts_gateway() -> None:
    gateway = Gateway(store=MemoryStore())
    assert gateway.host.gateway is gateway
