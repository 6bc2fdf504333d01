"""prompt-context, loaded from its installed entry point with agentplug's pytest fixtures."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Any

import agentplug_prompt_context
import pytest
from agentplug import PluginHost, PluginRecord
from agentplug.core.results import HandlerStatus
from agentplug.testing.pytest_plugin import Dispatcher, PluginLoader
from agentplug_hookspecs.agent import ContextResult, PromptBuildResult

PLUGIN_ID = "prompt-context"

Build = Callable[[], PromptBuildResult]
Prepare = Callable[[list[Any]], ContextResult]


def prompt_context_entry(**entry: Any) -> pytest.MarkDecorator:
    """``plugins.entries.prompt-context`` (``config=...``, ``hooks=...``) for the test's host."""
    return pytest.mark.agentplug_config({"plugins": {"entries": {PLUGIN_ID: entry}}})


@pytest.fixture(autouse=True)
def prompt_context(agentplug_load: PluginLoader) -> PluginRecord:
    """The plugin, registered from its entry point like an installed plugin (not bundled)."""
    return agentplug_load(PLUGIN_ID)


@pytest.fixture
def build(agentplug_dispatch: Dispatcher) -> Build:
    """``build()``: dispatch ``before_prompt_build`` for one prompt; the outcome."""

    def build() -> PromptBuildResult:
        event = {"prompt": "What changed?", "messages": []}
        outcome: PromptBuildResult = agentplug_dispatch("before_prompt_build", event).outcome
        return outcome

    return build


@pytest.fixture
def prepare(agentplug_dispatch: Dispatcher) -> Prepare:
    """``prepare(injections)``: dispatch ``agent_turn_prepare`` with the drained injections."""

    def prepare(injections: list[Any]) -> ContextResult:
        event = {"prompt": "continue", "injections": injections}
        outcome: ContextResult = agentplug_dispatch("agent_turn_prepare", event).outcome
        return outcome

    return prepare


def test_loads_from_its_entry_point_with_both_prompt_hooks_and_the_failure_watcher(
    prompt_context: PluginRecord, agentplug_host: PluginHost
) -> None:
    assert agentplug_host.plugins == [prompt_context]
    assert (prompt_context.plugin_id, prompt_context.bundled) == (PLUGIN_ID, False)
    assert sorted(prompt_context.hooks) == [
        "after_tool_call",
        "agent_turn_prepare",
        "before_prompt_build",
    ]


@prompt_context_entry(config={"context": "The user is on the billing team."})
def test_configured_context_is_prepended_to_the_prompt(build: Build) -> None:
    assert build().prepend_context == "The user is on the billing team."


@prompt_context_entry(config={"system_context": "Answer in British English."})
def test_configured_system_context_is_appended_to_the_system_prompt(build: Build) -> None:
    assert build().append_system_context == "Answer in British English."


def test_without_system_context_the_date_is_appended(
    build: Build, monkeypatch: pytest.MonkeyPatch
) -> None:
    moment = dt.datetime(2026, 12, 2, 23, 30, tzinfo=dt.UTC)
    monkeypatch.setattr(agentplug_prompt_context, "utc_now", lambda: moment)
    outcome = build()
    assert outcome.append_system_context == "Current date (UTC): 2026-12-02."
    assert outcome.prepend_context is None


@prompt_context_entry(config={"context": "x" * 500, "max_chars": 100})
def test_added_context_is_bounded_by_max_chars(build: Build) -> None:
    outcome = build()
    assert outcome.prepend_context is not None and len(outcome.prepend_context) == 100


def test_drained_injections_become_prepended_context_in_queue_order(prepare: Prepare) -> None:
    outcome = prepare(
        [
            {"text": "Approval granted for deploy #12.", "placement": "prepend_context"},
            {"text": "Monitor: CPU back to normal."},
        ]
    )
    assert (
        outcome.prepend_context
        == "Approval granted for deploy #12.\n\nMonitor: CPU back to normal."
    )
    assert outcome.append_context is None


def test_append_placement_goes_after_the_prompt(prepare: Prepare) -> None:
    outcome = prepare([{"text": "Reply briefly.", "placement": "append_context"}])
    assert (outcome.prepend_context, outcome.append_context) == (None, "Reply briefly.")


def test_malformed_injections_are_skipped_without_losing_the_others(prepare: Prepare) -> None:
    outcome = prepare(["bare string", {"text": ""}, {"no": "text"}, {"text": "kept"}])
    assert outcome.prepend_context == "kept"


def test_a_turn_without_injections_adds_nothing(prepare: Prepare) -> None:
    outcome = prepare([])
    assert (outcome.prepend_context, outcome.append_context) == (None, None)


@prompt_context_entry(config={"context": "secret sauce"}, hooks={"allow_prompt_injection": False})
def test_allow_prompt_injection_false_switches_both_hooks_off(
    agentplug_dispatch: Dispatcher, prepare: Prepare
) -> None:
    result = agentplug_dispatch("before_prompt_build", {"prompt": "hi"})
    assert HandlerStatus.OK not in [h.status for h in result.handlers]
    assert result.outcome.prepend_context is None
    assert prepare([{"text": "queued"}]).prepend_context is None


def test_a_failed_tool_call_reaches_the_next_turn_exactly_once(
    prompt_context: PluginRecord,
    agentplug_host: PluginHost,
    agentplug_dispatch: Dispatcher,
    agentplug_run: Callable[[Any], Any],
) -> None:
    from agentplug.services.turns import prepare_turn

    failure = {"tool_name": "web_search", "error": "rate limited", "tool_call_id": "t1"}
    agentplug_dispatch("after_tool_call", failure, {"session_key": "s1"})
    agentplug_dispatch("after_tool_call", failure, {"session_key": "s1"})  # a retried note

    sessions = agentplug_host.gateway.sessions
    first = agentplug_run(prepare_turn(agentplug_host, "s1", "hello", [], sessions=sessions))
    second = agentplug_run(prepare_turn(agentplug_host, "s1", "hello again", [], sessions=sessions))

    note = "Note: the last web_search call failed (rate limited)."
    assert first.prepend_context is not None and first.prepend_context.count(note) == 1
    assert second.prepend_context is None or note not in second.prepend_context


def test_a_successful_tool_call_queues_nothing(
    prompt_context: PluginRecord, agentplug_host: PluginHost, agentplug_dispatch: Dispatcher
) -> None:
    agentplug_dispatch("after_tool_call", {"tool_name": "web_search"}, {"session_key": "s1"})
    assert agentplug_host.gateway.sessions.pending_injections("s1") == []
