"""Fault matrix: every decision hook the runner calls, with a handler that raises, hangs
past its budget or returns a result of the wrong shape. The turn's outcome must match
the hook's documented failure policy (HOOKS.md §2.4 and the catalogue)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentplug import PluginApi
from agentplug.agent.tools import ToolCallContext

from tests.agent.conftest import make_runner, run, tool_call

# Handlers of the deprecated before_agent_start are registered on purpose here.
pytestmark = pytest.mark.filterwarnings(
    "ignore:plugin .* uses deprecated hook 'before_agent_start'"
)


# hook -> what the turn looks like when its only (faulty) handler fails
SKIP = "skip"  # the failure is ignored: the turn behaves as if the handler were absent
BLOCK_RUN = "block_run"  # fail closed: the run is blocked before the model
BLOCK_TOOL = "block_tool"  # fail closed: the tool call does not run

DECISION_HOOKS = {
    "inbound_claim": SKIP,
    "agent_turn_prepare": SKIP,
    "before_model_resolve": SKIP,
    "before_prompt_build": SKIP,
    "before_agent_start": SKIP,
    "before_agent_run": BLOCK_RUN,
    "before_agent_reply": SKIP,
    "heartbeat_prompt_contribution": SKIP,
    "before_tool_call": BLOCK_TOOL,
    "resolve_exec_env": SKIP,
    "tool_result_persist": SKIP,
    "before_message_write": SKIP,
    "before_agent_finalize": SKIP,
    "message_sending": SKIP,
    "reply_payload_sending": SKIP,
}
SYNC_HOOKS = {"tool_result_persist", "before_message_write"}  # no budget: they cannot hang


def _faulty(fault: str) -> Any:
    if fault == "raise":

        def boom() -> None:
            raise RuntimeError("handler exploded")

        return boom
    if fault == "invalid":
        return lambda: 42
    release = asyncio.Event()

    async def hang() -> None:
        await release.wait()

    return hang


CASES = [
    pytest.param(hook, fault, id=f"{hook}-{fault}")
    for hook in DECISION_HOOKS
    for fault in ("raise", "hang", "invalid")
    if not (fault == "hang" and hook in SYNC_HOOKS)
]


@pytest.mark.parametrize(("hook", "fault"), CASES)
def test_a_failing_decision_handler_follows_the_hooks_failure_policy(hook: str, fault: str) -> None:
    def plugin(api: PluginApi) -> None:
        api.on(hook, _faulty(fault), timeout_ms=30)

    ran: list[dict[str, str] | None] = []

    def shell(command: str, call: ToolCallContext) -> str:
        """Run a command."""
        ran.append(call.exec_env)
        return "listed"

    sent: list[dict[str, Any]] = []
    runner, provider = make_runner(
        [tool_call("shell", {"command": "ls"}), "Hello"],
        plugins={"faulty": plugin},
        channel=sent.append,
        config={"plugins": {"entries": {"faulty": {"hooks": {"allow_conversation_access": True}}}}},
    )
    runner.tools.add_python(shell, kind="exec")
    if hook == "heartbeat_prompt_contribution":  # heartbeat turns only
        result = run(runner.run_turn("check in", session_key="s1", heartbeat=True))
    else:
        result = run(runner.handle_inbound({"content": "list files", "sender_id": "u1"}))

    policy = DECISION_HOOKS[hook]
    statuses = [
        h["status"]
        for entry in result.trace
        if entry.get("kind") == "hook" and entry["name"] == hook
        for h in entry.get("handlers", [])
        if h["plugin_id"] == "faulty"
    ]
    assert statuses and set(statuses) <= {"error", "timeout"}, statuses
    if policy == BLOCK_RUN:
        assert result.status == "blocked" and not result.success
        assert provider.requests == [] and sent == []
        assert "handler exploded" not in str(result.model_dump())
        return
    assert result.status == "replied" and result.success, result.error
    assert result.reply == "Hello" and sent[0]["text"] == "Hello"
    if policy == BLOCK_TOOL:
        assert ran == []
        assert "blocked" in provider.requests[1].messages[-1]["content"]
    else:
        assert ran == [{}]
