"""tool-preflight, loaded from its installed entry point with agentplug's pytest fixtures."""

from __future__ import annotations

from typing import Any

import pytest
from agentplug import PluginApi, PluginHost, PluginRecord
from agentplug.core.results import HandlerStatus
from agentplug.testing.pytest_plugin import ApprovalScript, Dispatcher, PluginLoader

PLUGIN_ID = "tool-preflight"


def preflight_config(**config: Any) -> pytest.MarkDecorator:
    """``plugins.entries.tool-preflight.config`` for the test's host."""
    return pytest.mark.agentplug_config({"plugins": {"entries": {PLUGIN_ID: {"config": config}}}})


@pytest.fixture(autouse=True)
def preflight(agentplug_load: PluginLoader) -> PluginRecord:
    """The plugin, registered from its entry point like an installed plugin (not bundled)."""
    return agentplug_load(PLUGIN_ID)


def test_loads_from_its_entry_point_at_priority_50(
    preflight: PluginRecord, agentplug_host: PluginHost
) -> None:
    assert agentplug_host.plugins == [preflight]
    assert (preflight.plugin_id, preflight.bundled, preflight.hooks) == (
        PLUGIN_ID,
        False,
        ["before_tool_call"],
    )
    assert [h.priority for h in agentplug_host.plan("before_tool_call")] == [50]


def test_web_search_requires_approval_with_the_seed_wording(
    agentplug_dispatch: Dispatcher,
) -> None:
    event = {"tool_name": "web_search", "params": {"query": "pluggy hook ordering"}}
    outcome = agentplug_dispatch("before_tool_call", event).outcome
    assert not outcome.blocked
    assert outcome.needs_approval
    approval = outcome.approval
    assert approval is not None
    assert approval.title == "Run web search"
    assert approval.description == "Allow search query: pluggy hook ordering"
    assert approval.severity == "info"
    assert approval.timeout_ms == 60_000


def test_the_runtime_stamps_the_plugin_id_on_the_approval(agentplug_dispatch: Dispatcher) -> None:
    event = {"tool_name": "web_search", "params": {"query": "x"}}
    approval = agentplug_dispatch("before_tool_call", event).outcome.approval
    assert approval is not None and approval.plugin_id == PLUGIN_ID


def test_web_search_without_query_still_asks_with_an_empty_query(
    agentplug_dispatch: Dispatcher,
) -> None:
    event = {"tool_name": "web_search", "params": {}}
    approval = agentplug_dispatch("before_tool_call", event).outcome.approval
    assert approval is not None and approval.description == "Allow search query: "


def test_an_oversized_query_is_shortened_instead_of_failing_closed(
    agentplug_dispatch: Dispatcher,
) -> None:
    event = {"tool_name": "web_search", "params": {"query": "q" * 10_000}}
    result = agentplug_dispatch("before_tool_call", event)
    assert [h.status for h in result.handlers] == [HandlerStatus.OK]
    approval = result.outcome.approval
    assert approval is not None and approval.description.endswith("\u2026")
    assert len(approval.description) < 2_100


def test_other_tools_pass_without_a_decision(agentplug_dispatch: Dispatcher) -> None:
    event = {"tool_name": "read_file", "params": {"path": "README.md"}}
    outcome = agentplug_dispatch("before_tool_call", event).outcome
    assert (outcome.blocked, outcome.approval) == (False, None)
    assert outcome.params == {"path": "README.md"}


@preflight_config(blocked_tools=["exec"])
def test_a_tool_listed_in_blocked_tools_is_blocked_with_a_reason(
    agentplug_dispatch: Dispatcher,
) -> None:
    event = {"tool_name": "exec", "params": {"command": "rm -rf /"}}
    outcome = agentplug_dispatch("before_tool_call", event).outcome
    assert outcome.blocked
    assert outcome.blocked_by == PLUGIN_ID
    assert outcome.block_reason is not None and "'exec' is blocked" in outcome.block_reason


@preflight_config(blocked_tools=["Exec"])
def test_blocked_tools_match_regardless_of_case(agentplug_dispatch: Dispatcher) -> None:
    outcome = agentplug_dispatch("before_tool_call", {"tool_name": "EXEC", "params": {}}).outcome
    assert outcome.blocked


@preflight_config(blocked_tools=["web_search"])
def test_blocking_wins_over_approval_for_a_blocked_web_search(
    agentplug_dispatch: Dispatcher,
) -> None:
    event = {"tool_name": "web_search", "params": {"query": "x"}}
    outcome = agentplug_dispatch("before_tool_call", event).outcome
    assert outcome.blocked and outcome.approval is None


@preflight_config(blocked_tools="exec")
def test_a_misconfigured_blocked_tools_fails_closed_naming_the_setting(
    agentplug_dispatch: Dispatcher,
) -> None:
    outcome = agentplug_dispatch("before_tool_call", {"tool_name": "read_file"}).outcome
    assert outcome.blocked
    assert outcome.block_reason is not None
    assert "plugins.entries.tool-preflight.config.blocked_tools" in outcome.block_reason


def test_parameters_are_frozen_for_lower_priority_handlers_once_approval_is_asked(
    agentplug_load: PluginLoader, agentplug_dispatch: Dispatcher
) -> None:
    def rewrite(event: Any) -> dict[str, Any]:
        return {"params": {"query": "something else"}}

    def register(api: PluginApi) -> None:
        api.on("before_tool_call", rewrite)  # default priority 0: runs after tool-preflight

    agentplug_load(register, "rewriter", bundled=False)
    event = {"tool_name": "web_search", "params": {"query": "original"}}
    outcome = agentplug_dispatch("before_tool_call", event).outcome
    assert outcome.params == {"query": "original"}


def test_an_allow_once_decision_lets_the_search_run(agentplug_approvals: ApprovalScript) -> None:
    agentplug_approvals.script("web_search", "allow-once")
    check = agentplug_approvals.tool_call_sync("web_search", {"query": "agentplug"})
    assert check.outcome.needs_approval
    assert (check.verdict.allowed, check.verdict.resolution) == (True, "allow-once")
    assert [p.tool_name for p in agentplug_approvals.asked] == ["web_search"]


def test_a_deny_decision_blocks_the_search(agentplug_approvals: ApprovalScript) -> None:
    agentplug_approvals.script("web_search", "deny")
    check = agentplug_approvals.tool_call_sync("web_search", {"query": "agentplug"})
    assert check.outcome.needs_approval
    assert (check.verdict.allowed, check.verdict.resolution) == (False, "deny")
    assert [p.tool_name for p in agentplug_approvals.asked] == ["web_search"]
