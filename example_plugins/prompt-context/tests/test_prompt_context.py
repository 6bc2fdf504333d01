"""prompt-context, exercised through a real PluginHost loading its entry point."""

from __future__ import annotations

import asyncio
import datetime as dt
from typing import Any

import agentplug_prompt_context
import pytest
from agentplug import PluginHost
from agentplug.dispatch import HandlerStatus
from agentplug_hookspecs.agent import ContextResult, PromptBuildResult

PLUGIN_ID = "prompt-context"


def make_host(config: dict[str, Any] | None = None, **hooks: Any) -> PluginHost:
    entry: dict[str, Any] = {"config": config or {}, "hooks": hooks}
    host = PluginHost({"plugins": {"allow": [PLUGIN_ID], "entries": {PLUGIN_ID: entry}}})
    host.load_installed()
    assert host.load_errors == []
    return host


def build(host: PluginHost) -> PromptBuildResult:
    event = {"prompt": "What changed?", "messages": []}
    return asyncio.run(host.hooks.before_prompt_build(event)).outcome


def prepare(host: PluginHost, injections: list[Any]) -> ContextResult:
    event = {"prompt": "continue", "injections": injections}
    return asyncio.run(host.hooks.agent_turn_prepare(event)).outcome


def test_loads_from_its_entry_point_with_both_prompt_hooks() -> None:
    (record,) = make_host().plugins
    assert sorted(record.hooks) == ["agent_turn_prepare", "before_prompt_build"]


def test_configured_context_is_prepended_to_the_prompt() -> None:
    outcome = build(make_host({"context": "The user is on the billing team."}))
    assert outcome.prepend_context == "The user is on the billing team."


def test_configured_system_context_is_appended_to_the_system_prompt() -> None:
    outcome = build(make_host({"system_context": "Answer in British English."}))
    assert outcome.append_system_context == "Answer in British English."


def test_without_system_context_the_date_is_appended(monkeypatch: pytest.MonkeyPatch) -> None:
    moment = dt.datetime(2026, 12, 2, 23, 30, tzinfo=dt.UTC)
    monkeypatch.setattr(agentplug_prompt_context, "utc_now", lambda: moment)
    outcome = build(make_host())
    assert outcome.append_system_context == "Current date (UTC): 2026-12-02."
    assert outcome.prepend_context is None


def test_added_context_is_bounded_by_max_chars() -> None:
    outcome = build(make_host({"context": "x" * 500, "max_chars": 100}))
    assert outcome.prepend_context is not None and len(outcome.prepend_context) == 100


def test_drained_injections_become_prepended_context_in_queue_order() -> None:
    outcome = prepare(
        make_host(),
        [
            {"text": "Approval granted for deploy #12.", "placement": "prepend_context"},
            {"text": "Monitor: CPU back to normal."},
        ],
    )
    assert (
        outcome.prepend_context
        == "Approval granted for deploy #12.\n\nMonitor: CPU back to normal."
    )
    assert outcome.append_context is None


def test_append_placement_goes_after_the_prompt() -> None:
    outcome = prepare(make_host(), [{"text": "Reply briefly.", "placement": "append_context"}])
    assert (outcome.prepend_context, outcome.append_context) == (None, "Reply briefly.")


def test_malformed_injections_are_skipped_without_losing_the_others() -> None:
    outcome = prepare(make_host(), ["bare string", {"text": ""}, {"no": "text"}, {"text": "kept"}])
    assert outcome.prepend_context == "kept"


def test_a_turn_without_injections_adds_nothing() -> None:
    outcome = prepare(make_host(), [])
    assert (outcome.prepend_context, outcome.append_context) == (None, None)


def test_allow_prompt_injection_false_switches_both_hooks_off() -> None:
    host = make_host({"context": "secret sauce"}, allow_prompt_injection=False)
    result = asyncio.run(host.hooks.before_prompt_build({"prompt": "hi"}))
    assert HandlerStatus.OK not in [h.status for h in result.handlers]
    assert result.outcome.prepend_context is None
    assert prepare(host, [{"text": "queued"}]).prepend_context is None
