"""The facts a turn's trace gives a timeline: where each step sits on the turn's time
axis, and which reasons it may show (issue 31)."""

from __future__ import annotations

import json
from typing import Any

from tests.agent.conftest import make_runner, on, run, tool_call

CANARY = "CANARY-7f1c-confidential-run-reason"


def _echo(text: str) -> str:
    """Echo the text back."""
    return text


def test_every_trace_entry_starts_at_or_after_the_one_before_it() -> None:
    runner, _ = make_runner([tool_call("echo", {"text": "hi"}), "Done."])
    runner.tools.add_python(_echo, name="echo")
    result = run(runner.handle_inbound({"content": "hello", "sender_id": "u1"}))
    hooks = [e for e in result.trace if e["kind"] == "hook"]
    starts = [e["start_ms"] for e in hooks]
    assert starts == sorted(starts) and starts[0] >= 0.0
    assert len(hooks) > 10


def test_a_step_recorded_after_it_ended_is_placed_where_it_began() -> None:
    runner, _ = make_runner([tool_call("echo", {"text": "hi"}), "Done."])
    runner.tools.add_python(_echo, name="echo")
    result = run(runner.handle_inbound({"content": "hello"}))
    names = [(e["kind"], e["name"]) for e in result.trace]
    model = result.trace[names.index(("model", "scripted/default"))]
    ended = result.trace[names.index(("hook", "model_call_ended"))]
    # The model entry is recorded after model_call_ended, but placed where the call
    # began, and the call ended before the hook that reports its end (3-decimal rounding).
    assert model["start_ms"] <= ended["start_ms"]
    assert model["start_ms"] + model["duration_ms"] <= ended["start_ms"] + 0.002


def test_a_blocked_tool_call_carries_the_reason_the_model_reads() -> None:
    def block(event: Any) -> dict[str, Any] | None:
        return {"block": True, "block_reason": "no echo on Sundays"}

    runner, provider = make_runner(
        [tool_call("echo", {"text": "hi"}), "ok"], plugins={"guard": on("before_tool_call", block)}
    )
    runner.tools.add_python(_echo, name="echo")
    result = run(runner.handle_inbound({"content": "hello"}))
    (tool,) = [e for e in result.trace if e["kind"] == "tool"]
    assert tool["decision"]["blocked_by"] == "guard"
    assert tool["decision"]["reason"] == "no echo on Sundays"
    read = [m for m in provider.requests[1].messages if m.get("role") == "tool"]
    assert "no echo on Sundays" in read[0]["content"]


def test_an_allowed_tool_call_carries_no_reason() -> None:
    runner, _ = make_runner([tool_call("echo", {"text": "hi"}), "ok"])
    runner.tools.add_python(_echo, name="echo")
    result = run(runner.handle_inbound({"content": "hello"}))
    (tool,) = [e for e in result.trace if e["kind"] == "tool"]
    assert "reason" not in tool["decision"]


def test_the_confidential_run_reason_is_in_no_trace_entry() -> None:
    def guard(event: Any) -> dict[str, Any]:
        return {"outcome": "block", "reason": CANARY, "message": "[withheld]"}

    runner, _ = make_runner(["never"], plugins={"run-guard": on("before_agent_run", guard)})
    result = run(runner.handle_inbound({"content": "hello"}))
    assert result.status == "blocked" and result.blocked_by == "run-guard"
    assert CANARY not in json.dumps(result.trace)
    assert CANARY not in result.model_dump_json()
