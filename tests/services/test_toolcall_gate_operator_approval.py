"""ToolCallGate: an approval the host requires for a call (the operator's ``agent.tools``
rule) is asked through the broker like any other; policies and hooks still win."""

from __future__ import annotations

from agentplug import PluginApi, PluginHost
from agentplug.services.approvals import ApprovalBroker
from agentplug.services.toolcalls import ToolCallGate
from agentplug.store import MemoryStore
from agentplug_hookspecs.tools import ApprovalRequest

from tests.services.test_toolcall_gate import recording, run_check

OPERATOR = "agentplug.tools"
EVENT = {"tool_name": "RESTART_AGENT", "params": {"reason": "model asked"}}


def operator_request() -> ApprovalRequest:
    return ApprovalRequest(
        title="Run the action RESTART_AGENT",
        description="RESTART_AGENT has side effects; agent.tools requires approval for it",
        severity="warning",
        plugin_id=OPERATOR,
    )


def hook_approval(api: PluginApi) -> None:
    api.on(
        "before_tool_call",
        lambda event: {"require_approval": {"title": "Restart?", "description": "plugin asks"}},
    )


def test_an_operator_approval_blocks_as_no_resolver_without_an_approver() -> None:
    gate = PluginHost(store=MemoryStore()).gateway.tool_calls.gate
    decision = run_check(gate, EVENT, approval=operator_request())
    assert (decision.allowed, decision.approval_resolution) == (False, "no-resolver")
    assert decision.blocked_by == OPERATOR
    assert decision.approval is not None and decision.approval.plugin_id == OPERATOR


def test_an_operator_approval_is_asked_with_the_parameters_that_would_run() -> None:
    resolver, asked = recording("allow-once")
    host = PluginHost(store=MemoryStore())
    gate = ToolCallGate(host, host.gateway.policies, ApprovalBroker(resolver))
    decision = run_check(gate, EVENT, approval=operator_request())
    assert decision.allowed and decision.approval_resolution == "allow-once"
    (pending,) = asked
    assert pending.plugin_id == OPERATOR and pending.tool_name == "RESTART_AGENT"
    assert pending.params == {"reason": "model asked"} and pending.run_id == "r1"


def test_a_before_tool_call_block_wins_over_an_operator_approval() -> None:
    host = PluginHost(store=MemoryStore())
    host.register(lambda api: api.on("before_tool_call", lambda event: {"block": True}), "guard")
    resolver, asked = recording("allow-once")
    decision = run_check(
        ToolCallGate(host, host.gateway.policies, ApprovalBroker(resolver)),
        EVENT,
        approval=operator_request(),
    )
    assert not decision.allowed and decision.blocked_by == "guard"
    assert asked == []


def test_a_trusted_policy_block_wins_over_an_operator_approval() -> None:
    host = PluginHost(store=MemoryStore())
    host.register(
        lambda api: api.register_trusted_tool_policy("deny-all", lambda e, c: {"block": True}),
        "core",
    )
    resolver, asked = recording("allow-once")
    decision = run_check(
        ToolCallGate(host, host.gateway.policies, ApprovalBroker(resolver)),
        EVENT,
        approval=operator_request(),
    )
    assert not decision.allowed and decision.blocked_by_policy == "deny-all"
    assert asked == []


def test_a_plugin_approval_does_not_replace_the_operator_approval() -> None:
    host = PluginHost(store=MemoryStore())
    host.register(hook_approval, "preflight")
    resolver, asked = recording("allow-once")
    decision = run_check(
        ToolCallGate(host, host.gateway.policies, ApprovalBroker(resolver)),
        EVENT,
        approval=operator_request(),
    )
    assert decision.allowed
    assert [p.plugin_id for p in asked] == [OPERATOR, "preflight"]


def test_a_denied_operator_approval_blocks_before_the_plugin_is_asked() -> None:
    host = PluginHost(store=MemoryStore())
    host.register(hook_approval, "preflight")
    resolver, asked = recording("deny")
    decision = run_check(
        ToolCallGate(host, host.gateway.policies, ApprovalBroker(resolver)),
        EVENT,
        approval=operator_request(),
    )
    assert not decision.allowed and decision.blocked_by == OPERATOR
    assert [p.plugin_id for p in asked] == [OPERATOR]


def test_an_allow_always_operator_grant_answers_the_next_call() -> None:
    host = PluginHost(store=MemoryStore())
    resolver, asked = recording("allow-always")
    gate = ToolCallGate(
        host, host.gateway.policies, ApprovalBroker(resolver, store=host.gateway.store)
    )
    first = run_check(gate, EVENT, approval=operator_request())
    again = run_check(gate, {**EVENT, "params": {"reason": "again"}}, approval=operator_request())
    assert first.allowed and again.allowed and len(asked) == 1
    assert again.grant_id == first.grant_id is not None
