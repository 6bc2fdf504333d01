"""Error messages name the plugin, the hook or the key, and say what to do."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentplug import DuplicatePluginError, PluginHost, hookimpl


def test_mutating_the_event_reports_read_only_and_what_to_return() -> None:
    def register(api: Any) -> None:
        def rewrite_in_place(event: Any) -> None:
            event.content = "changed"

        api.on("message_sending", rewrite_in_place)

    host = PluginHost()
    host.register(register, "mutator")
    result = asyncio.run(host.dispatch("message_sending", {"content": "hi"}))
    (report,) = result.handlers
    assert report.status == "error"
    assert report.error is not None and "read-only event" in report.error
    assert "{'content': ...}" in report.error
    assert result.outcome.content == "hi"


def test_registering_the_same_object_twice_names_the_first_plugin() -> None:
    class Plugin:
        @hookimpl
        def message_sending(self) -> None:
            return None

    plugin = Plugin()
    host = PluginHost()
    host.register(plugin, "first")
    with pytest.raises(DuplicatePluginError) as info:
        host.register(plugin, "second")
    assert "'second'" in str(info.value) and "'first'" in str(info.value)
