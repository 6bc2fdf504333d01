"""The tool-call pipeline's entrance for outside frameworks (``call``) honours an approval
the host requires for a call, exactly like the runner's own tool path."""

from __future__ import annotations

from typing import Any

from agentplug import Gateway
from agentplug.actions.model import Action, ActionResult
from agentplug.agent.action_tools import TOOLS_APPROVER, operator_approval
from agentplug.agent.pipeline import CallIds
from agentplug.store import MemoryStore

from tests.agent.conftest import run
from tests.services.test_toolcall_gate import recording

RESTART = Action(
    name="RESTART_AGENT",
    description="Restart the agent.",
    handler=lambda rt, msg, st, opts: ActionResult(success=True),
)


def _tool(ran: list[dict[str, Any]]) -> Any:
    def tool(params: dict[str, Any]) -> str:
        ran.append(params)
        return "restarting"

    return tool


def test_a_pipelined_call_that_needs_the_operators_approval_blocks_without_an_approver() -> None:
    ran: list[dict[str, Any]] = []
    pipeline = Gateway(store=MemoryStore()).tool_calls
    done = run(
        pipeline.call(
            "RESTART_AGENT",
            {},
            _tool(ran),
            CallIds(run_id="r1"),
            approval=operator_approval(RESTART),
        )
    )
    assert not done.allowed and ran == []
    assert done.decision is not None and done.decision.approval_resolution == "no-resolver"
    assert done.decision.blocked_by == TOOLS_APPROVER
    assert done.output.is_error and "tool call blocked" in done.output.content


def test_a_pipelined_call_runs_once_the_operators_approval_is_given() -> None:
    ran: list[dict[str, Any]] = []
    resolver, asked = recording("allow-once")
    pipeline = Gateway(store=MemoryStore(), resolver=resolver).tool_calls
    done = run(
        pipeline.call(
            "RESTART_AGENT",
            {"reason": "r"},
            _tool(ran),
            CallIds(run_id="r1"),
            approval=operator_approval(RESTART),
        )
    )
    assert done.allowed and ran == [{"reason": "r"}]
    assert [p.plugin_id for p in asked] == [TOOLS_APPROVER]
    assert asked[0].request.title == "Run the action RESTART_AGENT"
