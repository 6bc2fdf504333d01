"""Issue 13.8: ``message_received`` carries ``body_for_agent``, filled like ``inbound_claim``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost

ROOT = Path(__file__).resolve().parents[2]


def _seen(hook: str, event: dict[str, Any]) -> Any:
    seen: list[Any] = []

    def register(api: PluginApi) -> None:
        api.on(hook, lambda ev: seen.append(ev.body_for_agent))

    host = PluginHost()
    host.register(register, "reader")
    asyncio.run(host.dispatch(hook, event))
    return seen[0]


@pytest.mark.parametrize("hook", ["inbound_claim", "message_received"])
def test_body_for_agent_is_the_hosts_value_when_given(hook: str) -> None:
    event = {"content": "[telegram] Ana: hello", "body_for_agent": "hello"}
    assert _seen(hook, event) == "hello"


@pytest.mark.parametrize("hook", ["inbound_claim", "message_received"])
def test_body_for_agent_defaults_to_the_content_when_the_host_gives_none(hook: str) -> None:
    assert _seen(hook, {"content": "hello there"}) == "hello there"


def test_plain_text_envelope_deprecation_is_documented() -> None:
    text = (ROOT / "docs" / "migration.md").read_text(encoding="utf-8")
    assert "body_for_agent" in text and "envelope" in text
