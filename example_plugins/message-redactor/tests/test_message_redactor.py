"""message-redactor, loaded from its installed entry point with agentplug's pytest fixtures."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost, PluginRecord
from agentplug.core.results import HandlerStatus
from agentplug.testing.pytest_plugin import Dispatcher, PluginLoader
from agentplug_hookspecs.messages import MessageSendingEvent, MessageSendingOutcome

PLUGIN_ID = "message-redactor"
OPENAI_KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0"
GITHUB_TOKEN = "ghp_" + "0123456789abcdefghijABCDEFGHIJ"

Send = Callable[[str], MessageSendingOutcome]


def redactor_config(**config: Any) -> pytest.MarkDecorator:
    """``plugins.entries.message-redactor.config`` for the test's host."""
    return pytest.mark.agentplug_config({"plugins": {"entries": {PLUGIN_ID: {"config": config}}}})


@pytest.fixture(autouse=True)
def redactor(agentplug_load: PluginLoader) -> PluginRecord:
    """The plugin, registered from its entry point like an installed plugin (not bundled)."""
    return agentplug_load(PLUGIN_ID)


@pytest.fixture
def send(agentplug_dispatch: Dispatcher) -> Send:
    """``send(content)``: dispatch ``message_sending`` to ``user-1``; the outcome."""

    def send(content: str) -> MessageSendingOutcome:
        result = agentplug_dispatch("message_sending", {"content": content, "to": "user-1"})
        outcome: MessageSendingOutcome = result.outcome
        return outcome

    return send


def test_loads_from_its_entry_point_as_a_message_sending_handler(
    redactor: PluginRecord, agentplug_host: PluginHost
) -> None:
    assert agentplug_host.plugins == [redactor]
    assert (redactor.plugin_id, redactor.bundled, redactor.hooks) == (
        PLUGIN_ID,
        False,
        ["message_sending"],
    )
    assert [h.priority for h in agentplug_host.plan("message_sending")] == [100]


def test_api_key_like_tokens_are_redacted(send: Send) -> None:
    outcome = send(f"use {OPENAI_KEY} or {GITHUB_TOKEN} to log in")
    assert outcome.content == "use [REDACTED:api_key] or [REDACTED:api_key] to log in"
    assert outcome.changed_by == [PLUGIN_ID]


def test_a_named_credential_keeps_its_name_and_loses_its_value(send: Send) -> None:
    assert send("password: hunter2hunter2 ok").content == "password: [REDACTED:api_key] ok"


def test_email_addresses_are_redacted(send: Send) -> None:
    assert send("write to ana.perez@example.org today").content == (
        "write to [REDACTED:email] today"
    )


@redactor_config(redact_emails=False)
def test_builtin_detectors_can_be_switched_off(send: Send) -> None:
    content = "write to ana@example.org"
    assert send(content).content == content


@redactor_config(patterns=[r"EMP-\d{5}"])
def test_configured_patterns_are_redacted(send: Send) -> None:
    assert send("ticket EMP-12345 closed").content == "ticket [REDACTED:pattern] closed"


@redactor_config(patterns={"card": r"(?:\d{4} ?){4}"})
def test_named_patterns_label_their_redactions(send: Send) -> None:
    assert send("card 4111 1111 1111 1111").content == "card [REDACTED:card]"


@redactor_config(patterns={"pin": r"PIN (?P<secret>\d{4})"})
def test_a_secret_group_limits_the_redaction_to_that_group(send: Send) -> None:
    assert send("your PIN 1234.").content == "your PIN [REDACTED:pin]."


def test_clean_content_is_left_alone(send: Send) -> None:
    outcome = send("nothing to hide here")
    assert (outcome.content, outcome.changed_by, outcome.cancelled) == (
        "nothing to hide here",
        [],
        False,
    )


@redactor_config(forbidden=["project nightingale"])
def test_a_forbidden_phrase_cancels_delivery(send: Send) -> None:
    outcome = send("The Project Nightingale launch is Friday")
    assert outcome.cancelled
    assert outcome.cancelled_by == PLUGIN_ID
    assert outcome.metadata == {"plugin": PLUGIN_ID, "rule": "forbidden", "phrase_index": 0}


@redactor_config(forbidden=["nightingale"])
def test_the_cancel_reason_repeats_neither_the_phrase_nor_the_content(send: Send) -> None:
    outcome = send("launch of nightingale")
    assert outcome.cancel_reason is not None
    assert "nightingale" not in outcome.cancel_reason.casefold()
    assert len(outcome.cancel_reason) <= 500


def test_lower_priority_handlers_see_the_redacted_content(
    agentplug_load: PluginLoader, send: Send
) -> None:
    seen: list[str] = []

    def register(api: PluginApi) -> None:
        def observe(event: MessageSendingEvent) -> None:
            seen.append(event.content)

        api.on("message_sending", observe)

    agentplug_load(register, "downstream", bundled=False)
    send(f"key {OPENAI_KEY}")
    assert seen == ["key [REDACTED:api_key]"]


@redactor_config(patterns=["ok", "(unclosed"])
def test_an_invalid_pattern_withholds_the_message_naming_the_key(
    agentplug_dispatch: Dispatcher,
) -> None:
    result = agentplug_dispatch("message_sending", {"content": "hello", "to": "user-1"})
    assert [h.status for h in result.handlers] == [HandlerStatus.OK]
    assert result.outcome.cancelled
    assert result.outcome.cancel_reason is not None
    assert "config.patterns[1]" in result.outcome.cancel_reason
