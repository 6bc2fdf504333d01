"""Issue 13.9: the agent hook context carries the resolved context-window metadata."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost
from agentplug_hookspecs.common import AgentContext

FIELDS = ("context_token_budget", "context_window_source", "context_window_reference_tokens")


@pytest.mark.parametrize("field", FIELDS)
def test_agent_context_declares_the_context_window_field(field: str) -> None:
    assert field in AgentContext.model_fields


def test_agent_context_window_fields_are_typed() -> None:
    with pytest.raises(ValueError, match="context_token_budget"):
        AgentContext(context_token_budget="a lot")


def test_agent_context_window_fields_reach_handlers_in_camel_or_snake_case() -> None:
    seen: list[Any] = []

    def register(api: PluginApi) -> None:
        api.on("llm_output", lambda event, ctx: seen.append(ctx))

    host = PluginHost()
    host.register(register, "budget-reader")
    ctx = {
        "contextTokenBudget": 8000,
        "context_window_source": "agent",
        "contextWindowReferenceTokens": 128000,
    }
    asyncio.run(host.dispatch("llm_output", {"output": "x"}, ctx))
    assert seen[0].context_token_budget == 8000
    assert seen[0].context_window_source == "agent"
    assert seen[0].context_window_reference_tokens == 128000
