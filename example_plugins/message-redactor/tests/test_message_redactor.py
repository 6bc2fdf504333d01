"""message-redactor, exercised through a real PluginHost loading its entry point."""

from __future__ import annotations

import asyncio
from typing import Any

from agentplug import PluginApi, PluginHost
from agentplug.dispatch import DispatchResult, HandlerStatus
from agentplug_hookspecs.messages import MessageSendingEvent, MessageSendingOutcome

PLUGIN_ID = "message-redactor"
OPENAI_KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0"
GITHUB_TOKEN = "ghp_" + "0123456789abcdefghijABCDEFGHIJ"


def make_host(config: dict[str, Any] | None = None) -> PluginHost:
    entry: dict[str, Any] = {"config": config} if config is not None else {}
    host = PluginHost({"plugins": {"allow": [PLUGIN_ID], "entries": {PLUGIN_ID: entry}}})
    host.load_installed()
    assert host.load_errors == []
    return host


def send(host: PluginHost, content: str) -> DispatchResult[MessageSendingOutcome]:
    return asyncio.run(host.hooks.message_sending({"content": content, "to": "user-1"}))


def sent(content: str, config: dict[str, Any] | None = None) -> MessageSendingOutcome:
    return send(make_host(config), content).outcome


def test_loads_from_its_entry_point_as_a_message_sending_handler() -> None:
    host = make_host()
    (record,) = host.plugins
    assert (record.plugin_id, record.hooks) == (PLUGIN_ID, ["message_sending"])
    assert [h.priority for h in host.plan("message_sending")] == [100]


def test_api_key_like_tokens_are_redacted() -> None:
    outcome = sent(f"use {OPENAI_KEY} or {GITHUB_TOKEN} to log in")
    assert outcome.content == "use [REDACTED:api_key] or [REDACTED:api_key] to log in"
    assert outcome.changed_by == [PLUGIN_ID]


def test_a_named_credential_keeps_its_name_and_loses_its_value() -> None:
    assert sent("password: hunter2hunter2 ok").content == "password: [REDACTED:api_key] ok"


def test_email_addresses_are_redacted() -> None:
    assert sent("write to ana.perez@example.org today").content == (
        "write to [REDACTED:email] today"
    )


def test_builtin_detectors_can_be_switched_off() -> None:
    content = "write to ana@example.org"
    assert sent(content, {"redact_emails": False}).content == content


def test_configured_patterns_are_redacted() -> None:
    outcome = sent("ticket EMP-12345 closed", {"patterns": [r"EMP-\d{5}"]})
    assert outcome.content == "ticket [REDACTED:pattern] closed"


def test_named_patterns_label_their_redactions() -> None:
    outcome = sent("card 4111 1111 1111 1111", {"patterns": {"card": r"(?:\d{4} ?){4}"}})
    assert outcome.content == "card [REDACTED:card]"


def test_a_secret_group_limits_the_redaction_to_that_group() -> None:
    config = {"patterns": {"pin": r"PIN (?P<secret>\d{4})"}}
    assert sent("your PIN 1234.", config).content == "your PIN [REDACTED:pin]."


def test_clean_content_is_left_alone() -> None:
    outcome = sent("nothing to hide here")
    assert (outcome.content, outcome.changed_by, outcome.cancelled) == (
        "nothing to hide here",
        [],
        False,
    )


def test_a_forbidden_phrase_cancels_delivery() -> None:
    outcome = sent(
        "The Project Nightingale launch is Friday", {"forbidden": ["project nightingale"]}
    )
    assert outcome.cancelled
    assert outcome.cancelled_by == PLUGIN_ID
    assert outcome.metadata == {"plugin": PLUGIN_ID, "rule": "forbidden", "phrase_index": 0}


def test_the_cancel_reason_repeats_neither_the_phrase_nor_the_content() -> None:
    outcome = sent("launch of nightingale", {"forbidden": ["nightingale"]})
    assert outcome.cancel_reason is not None
    assert "nightingale" not in outcome.cancel_reason.casefold()
    assert len(outcome.cancel_reason) <= 500


def test_lower_priority_handlers_see_the_redacted_content() -> None:
    host = make_host()
    seen: list[str] = []

    def register(api: PluginApi) -> None:
        def observe(event: MessageSendingEvent) -> None:
            seen.append(event.content)

        api.on("message_sending", observe)

    host.register(register, "downstream", bundled=False)
    send(host, f"key {OPENAI_KEY}")
    assert seen == ["key [REDACTED:api_key]"]


def test_an_invalid_pattern_withholds_the_message_naming_the_key() -> None:
    result = send(make_host({"patterns": ["ok", "(unclosed"]}), "hello")
    assert [h.status for h in result.handlers] == [HandlerStatus.OK]
    assert result.outcome.cancelled
    assert result.outcome.cancel_reason is not None
    assert "config.patterns[1]" in result.outcome.cancel_reason
