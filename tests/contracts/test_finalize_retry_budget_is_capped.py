"""Issue 13.6: ``before_agent_finalize`` retries are capped at 3 with a warning."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost


def _host_with_reviser(max_attempts: int) -> PluginHost:
    def register(api: PluginApi) -> None:
        def revise(event: Any) -> dict[str, Any]:
            return {
                "action": "revise",
                "reason": "too short",
                "retry": {"instruction": "expand", "max_attempts": max_attempts},
            }

        api.on("before_agent_finalize", revise)

    host = PluginHost()
    host.register(register, "greedy-reviser")
    return host


def test_before_agent_finalize_max_attempts_is_capped_at_three_with_a_warning_naming_the_plugin(
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = _host_with_reviser(10)
    with caplog.at_level(logging.WARNING):
        result = asyncio.run(host.dispatch("before_agent_finalize", {"reply": "hi"}))
    assert result.outcome.action == "revise"
    assert result.outcome.retry is not None
    assert result.outcome.retry.max_attempts == 3
    assert result.outcome.retry.instruction == "expand"
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("greedy-reviser" in m and "max_attempts" in m and "3" in m for m in warned)


def test_before_agent_finalize_max_attempts_within_the_cap_is_kept_without_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    host = _host_with_reviser(2)
    with caplog.at_level(logging.WARNING):
        result = asyncio.run(host.dispatch("before_agent_finalize", {"reply": "hi"}))
    assert result.outcome.retry.max_attempts == 2
    assert not [r for r in caplog.records if "max_attempts" in r.getMessage()]
