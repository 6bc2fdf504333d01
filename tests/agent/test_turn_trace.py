"""The turn trace: kept as the dispatcher returned it, turned into JSON when read (issue 30).

A turn with plugins dispatches about 30 hooks with hundreds of handler lines; the runner
keeps them compactly and ``TurnResult.trace`` builds the JSON on first read, so the rules
below are about what a reader sees: every handler line, in order, in ``model_dump`` too.
"""

from __future__ import annotations

import time
from typing import Any

from agentplug import Gateway, PluginApi
from agentplug.agent import TurnResult
from agentplug.agent.trace import TurnTrace
from agentplug.core.redaction import forget_secret, register_secret

from tests.agent.conftest import make_runner, on, run, tool_call


def _noop(event: Any, ctx: Any) -> None:
    return None


def _watcher(api: PluginApi) -> None:
    for hook in ("before_prompt_build", "before_tool_call", "before_message_write"):
        api.on(hook, _noop)


def _ok() -> str:
    """Answer ok."""
    return "ok"


def _tool_turn() -> TurnResult:
    runner, _ = make_runner(
        [tool_call("ok"), "Done."], plugins={"watch-a": _watcher, "watch-b": _watcher}
    )
    runner.tools.add_python(_ok, name="ok")
    return run(runner.handle_inbound({"content": "hi", "sender_id": "u1"}))


def test_every_handler_of_every_dispatch_is_a_line_of_the_trace() -> None:
    result = _tool_turn()
    writes = [e for e in result.trace if e["name"] == "before_message_write"]
    assert len(writes) == 4  # the user's message, the call, the tool result, the reply
    for entry in writes:
        assert [h["plugin_id"] for h in entry["handlers"]] == ["watch-a", "watch-b"]
        assert {h["status"] for h in entry["handlers"]} == {"ok"}


def test_hook_dispatches_and_runner_steps_keep_their_order() -> None:
    kinds = [(e["kind"], e["name"]) for e in _tool_turn().trace]
    model = [k for k, _ in kinds].index("model")
    tool = kinds.index(("tool", "ok"))
    assert kinds.index(("hook", "model_call_ended")) < model
    assert model < kinds.index(("hook", "llm_output")) < tool
    assert tool < kinds.index(("hook", "after_tool_call"))


def test_the_trace_a_turn_result_serialises_is_the_one_it_reads() -> None:
    result = _tool_turn()
    dumped = result.model_dump(mode="json")
    assert dumped["trace"] == result.trace
    assert [e["name"] for e in dumped["trace"] if e["kind"] == "hook"] == result.hooks


def test_a_turn_result_given_trace_entries_keeps_them() -> None:
    entries = [{"kind": "hook", "name": "agent_end", "duration_ms": 0.1}]
    built = TurnResult(run_id="r", session_key="s", status="replied", success=True, trace=entries)
    parsed = TurnResult.model_validate(built.model_dump(mode="json"))
    assert built.trace == entries and parsed.trace == entries
    assert parsed.hooks == ["agent_end"]


def test_entries_read_from_a_turn_trace_are_the_ones_it_serialises() -> None:
    gateway = Gateway()
    gateway.host.register(_watcher, "watch")
    trace = TurnTrace()
    result = run(gateway.host.hooks.before_tool_call({"tool_name": "t", "params": {}}))
    trace.record("before_tool_call", result, time.perf_counter())
    trace.add("tool", "t", 1.0, refused="no")
    assert [e.to_json() for e in trace.entries] == trace.to_json()
    assert trace.hooks == ["before_tool_call"]
    assert trace.entries[0].handlers[0]["plugin_id"] == "watch"


def _slow_writer(event: Any, ctx: Any) -> None:
    time.sleep(0.002)


def test_a_synchronous_hook_times_its_handlers_only_when_the_host_measures_timings() -> None:
    gateway = Gateway()
    host = gateway.host
    host.register(on("before_message_write", _slow_writer), "slow")
    event = {"message": {"role": "user", "content": "hi"}}
    untimed = host.hooks.before_message_write(event)
    host.timings = True
    timed = host.hooks.before_message_write(event)
    assert [h.duration_ms for h in untimed.handlers] == [0.0]
    assert timed.handlers[0].duration_ms > 0.0


SECRET = "sk-trace-test-6f1d2c9a8b7e"


def test_a_secret_in_a_step_of_the_trace_is_scrubbed_when_the_result_is_read() -> None:
    trace = TurnTrace()
    trace.add("tool", "web_search", 1.0, refused=f"the server answered {SECRET}")
    register_secret(SECRET)
    try:
        result = TurnResult.model_validate(
            {
                "run_id": "r",
                "session_key": "s",
                "status": "failed",
                "success": False,
                "trace": trace,
            }
        )
        [step] = result.trace
    finally:
        forget_secret(SECRET)
    assert step["decision"]["refused"].startswith("the server answered")
    assert SECRET not in str(result.model_dump())
