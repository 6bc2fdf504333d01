"""tool-preflight, exercised through a real PluginHost loading its entry point."""

from __future__ import annotations

import asyncio
from typing import Any, Literal

from agentplug import PluginApi, PluginHost
from agentplug.approvals import ApprovalBroker, ApprovalVerdict, ScriptedResolver
from agentplug.dispatch import DispatchResult, HandlerStatus
from agentplug_hookspecs.tools import ToolCallOutcome

PLUGIN_ID = "tool-preflight"
Decision = Literal["allow-once", "allow-always", "deny"]


def make_host(config: dict[str, Any] | None = None) -> PluginHost:
    entry: dict[str, Any] = {"config": config} if config is not None else {}
    host = PluginHost({"plugins": {"allow": [PLUGIN_ID], "entries": {PLUGIN_ID: entry}}})
    host.load_installed()
    assert host.load_errors == []
    return host


def call(host: PluginHost, tool_name: str, **params: Any) -> DispatchResult[ToolCallOutcome]:
    event = {"tool_name": tool_name, "params": params}
    return asyncio.run(host.hooks.before_tool_call(event))


def test_loads_from_its_entry_point_at_priority_50() -> None:
    host = make_host()
    (record,) = host.plugins
    assert (record.plugin_id, record.bundled, record.hooks) == (
        PLUGIN_ID,
        False,
        ["before_tool_call"],
    )
    assert [h.priority for h in host.plan("before_tool_call")] == [50]


def test_web_search_requires_approval_with_the_seed_wording() -> None:
    outcome = call(make_host(), "web_search", query="pluggy hook ordering").outcome
    assert not outcome.blocked
    assert outcome.needs_approval
    approval = outcome.approval
    assert approval is not None
    assert approval.title == "Run web search"
    assert approval.description == "Allow search query: pluggy hook ordering"
    assert approval.severity == "info"
    assert approval.timeout_ms == 60_000


def test_the_runtime_stamps_the_plugin_id_on_the_approval() -> None:
    approval = call(make_host(), "web_search", query="x").outcome.approval
    assert approval is not None and approval.plugin_id == PLUGIN_ID


def test_web_search_without_query_still_asks_with_an_empty_query() -> None:
    approval = call(make_host(), "web_search").outcome.approval
    assert approval is not None and approval.description == "Allow search query: "


def test_an_oversized_query_is_shortened_instead_of_failing_closed() -> None:
    result = call(make_host(), "web_search", query="q" * 10_000)
    assert [h.status for h in result.handlers] == [HandlerStatus.OK]
    approval = result.outcome.approval
    assert approval is not None and approval.description.endswith("\u2026")
    assert len(approval.description) < 2_100


def test_other_tools_pass_without_a_decision() -> None:
    outcome = call(make_host(), "read_file", path="README.md").outcome
    assert (outcome.blocked, outcome.approval) == (False, None)
    assert outcome.params == {"path": "README.md"}


def test_a_tool_listed_in_blocked_tools_is_blocked_with_a_reason() -> None:
    outcome = call(make_host({"blocked_tools": ["exec"]}), "exec", command="rm -rf /").outcome
    assert outcome.blocked
    assert outcome.blocked_by == PLUGIN_ID
    assert outcome.block_reason is not None and "'exec' is blocked" in outcome.block_reason


def test_blocked_tools_match_regardless_of_case() -> None:
    outcome = call(make_host({"blocked_tools": ["Exec"]}), "EXEC").outcome
    assert outcome.blocked


def test_blocking_wins_over_approval_for_a_blocked_web_search() -> None:
    outcome = call(make_host({"blocked_tools": ["web_search"]}), "web_search", query="x").outcome
    assert outcome.blocked and outcome.approval is None


def test_a_misconfigured_blocked_tools_fails_closed_naming_the_setting() -> None:
    outcome = call(make_host({"blocked_tools": "exec"}), "read_file").outcome
    assert outcome.blocked
    assert outcome.block_reason is not None
    assert "plugins.entries.tool-preflight.config.blocked_tools" in outcome.block_reason


def test_parameters_are_frozen_for_lower_priority_handlers_once_approval_is_asked() -> None:
    host = make_host()

    def rewrite(event: Any) -> dict[str, Any]:
        return {"params": {"query": "something else"}}

    def register(api: PluginApi) -> None:
        api.on("before_tool_call", rewrite)  # default priority 0: runs after tool-preflight

    host.register(register, "rewriter", bundled=False)
    outcome = call(host, "web_search", query="original").outcome
    assert outcome.params == {"query": "original"}


def decide(decision: Decision, tool_name: str = "web_search") -> ApprovalVerdict:
    host = make_host()
    outcome = call(host, tool_name, query="agentplug").outcome
    broker = ApprovalBroker(ScriptedResolver({tool_name: decision}))
    return asyncio.run(broker.decide(tool_name, outcome))


def test_an_allow_once_decision_lets_the_search_run() -> None:
    verdict = decide("allow-once")
    assert (verdict.allowed, verdict.resolution) == (True, "allow-once")


def test_a_deny_decision_blocks_the_search() -> None:
    verdict = decide("deny")
    assert (verdict.allowed, verdict.resolution) == (False, "deny")
