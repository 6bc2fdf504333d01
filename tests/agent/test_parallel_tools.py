"""Parallel tool calls: the gate decides in call order, the allowed calls run side by
side up to ``agent.tools.concurrency``, the results go back in call order, and a deny or
a failure of one call stops no other (agentplug.agent.toolrun, the one
``ToolCallPipeline``)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.agent.chat_server import ChatServer, chat_server
from tests.agent.conftest import Recorder, make_runner, on, run

LIVENESS_S = 10.0
"""How long a test waits for calls that must overlap before it calls the run a failure
(a bound on a hang, never a timing assertion)."""


def _calls(*names: str) -> dict[str, Any]:
    return {
        "text": "",
        "tool_calls": [
            {"id": f"c{i}", "name": name, "arguments": {"n": i}} for i, name in enumerate(names)
        ],
    }


class Barrier:
    """Async tools that finish only once ``parties`` of them run at the same time."""

    def __init__(self, parties: int) -> None:
        self.parties = parties
        self.running = 0
        self.most = 0
        self.started: list[int] = []
        self.finished: list[int] = []
        self.all_in = asyncio.Event()

    async def tool(self, n: int) -> str:
        self.started.append(n)
        self.running += 1
        self.most = max(self.most, self.running)
        if self.running >= self.parties:
            self.all_in.set()
        await asyncio.wait_for(self.all_in.wait(), LIVENESS_S)
        await asyncio.sleep(0.01 * (4 - n))  # the first call finishes last
        self.running -= 1
        self.finished.append(n)
        return f"result {n}"


def test_approved_calls_run_side_by_side_and_results_go_back_in_call_order() -> None:
    barrier = Barrier(4)
    runner, provider = make_runner([_calls("wait", "wait", "wait", "wait"), "done"])
    runner.tools.add_python(barrier.tool, name="wait", description="Waits for the others.")
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.reply == "done" and barrier.most == 4
    assert barrier.finished != [0, 1, 2, 3]  # they did finish out of order...
    tools = [m for m in result.transcript if m.get("role") == "tool"]
    assert [m["content"] for m in tools] == [f"result {n}" for n in range(4)]  # ...but not here
    assert [m["tool_call_id"] for m in provider.requests[1].messages if m["role"] == "tool"] == [
        "c0", "c1", "c2", "c3",
    ]  # fmt: skip


def test_the_gate_decides_every_call_in_call_order_before_any_runs() -> None:
    seen: list[str] = []

    def gate(event: Any, ctx: Any) -> None:
        seen.append(f"gate {event.tool_call_id}")

    barrier = Barrier(3)

    async def tool(n: int) -> str:
        seen.append(f"run c{n}")
        return await barrier.tool(n)

    runner, _ = make_runner(
        [_calls("wait", "wait", "wait"), "done"], plugins={"g": on("before_tool_call", gate)}
    )
    runner.tools.add_python(tool, name="wait", description="W.")
    run(runner.run_turn("hi", session_key="s1"))
    assert seen[:3] == ["gate c0", "gate c1", "gate c2"]
    assert sorted(seen[3:]) == ["run c0", "run c1", "run c2"]


def test_at_most_the_configured_number_of_calls_run_at_once() -> None:
    running, most = 0, 0

    async def tool(n: int) -> str:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.01)
        running -= 1
        return "ok"

    runner, _ = make_runner(
        [_calls(*["slow"] * 6), "done"], agent={"tools": {"actions": False, "concurrency": 2}}
    )
    runner.tools.add_python(tool, name="slow", description="S.")
    result = run(runner.run_turn("hi", session_key="s1"))
    assert result.reply == "done" and most == 2


def test_concurrency_one_runs_the_calls_one_after_another_in_call_order() -> None:
    order: list[str] = []

    async def tool(n: int) -> str:
        order.append(f"start {n}")
        await asyncio.sleep(0)
        order.append(f"end {n}")
        return "ok"

    runner, _ = make_runner(
        [_calls("t", "t", "t"), "done"], agent={"tools": {"actions": False, "concurrency": 1}}
    )
    runner.tools.add_python(tool, name="t", description="T.")
    run(runner.run_turn("hi", session_key="s1"))
    assert order == ["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"]


def test_a_denied_call_does_not_stop_the_others() -> None:
    def deny_second(event: Any, ctx: Any) -> dict[str, Any] | None:
        return {"block": True, "block_reason": "not this one"} if event.params["n"] == 1 else None

    barrier = Barrier(2)
    runner, _ = make_runner(
        [_calls("wait", "wait", "wait"), "done"],
        plugins={"deny": on("before_tool_call", deny_second)},
    )
    runner.tools.add_python(barrier.tool, name="wait", description="W.")
    result = run(runner.run_turn("hi", session_key="s1"))
    tools = [m for m in result.transcript if m.get("role") == "tool"]
    assert [m["content"] for m in tools] == [
        "result 0", "tool call blocked: not this one", "result 2",
    ]  # fmt: skip
    assert sorted(barrier.finished) == [0, 2]


def test_a_failing_call_does_not_stop_the_others() -> None:
    async def flaky(n: int) -> str:
        await asyncio.sleep(0)
        if n == 0:
            raise RuntimeError("disk on fire")
        return f"fine {n}"

    recorder = Recorder(("after_tool_call",))
    runner, _ = make_runner([_calls("f", "f", "f"), "done"], recorder=recorder)
    runner.tools.add_python(flaky, name="f", description="F.")
    result = run(runner.run_turn("hi", session_key="s1"))
    tools = [m["content"] for m in result.transcript if m.get("role") == "tool"]
    assert tools[0] == "tool 'f' failed: RuntimeError: disk on fire"
    assert tools[1:] == ["fine 1", "fine 2"] and result.reply == "done"
    assert len(recorder.events("after_tool_call")) == 3


def test_a_cancel_while_calls_run_answers_every_call_and_ends_the_turn() -> None:
    from agentplug.services.signals import AbortController

    controller = AbortController()

    async def tool(n: int) -> str:
        if n == 1:
            controller.abort("user left")
        await asyncio.sleep(0)
        return f"r{n}"

    runner, _ = make_runner([_calls("t", "t", "t"), "never"])
    runner.tools.add_python(tool, name="t", description="T.")
    result = run(runner.run_turn("hi", session_key="s1", signal=controller.signal))
    assert result.status == "cancelled"
    tools = [m for m in result.transcript if m.get("role") == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["c0", "c1", "c2"]


@pytest.fixture
def server() -> Iterator[ChatServer]:
    with chat_server() as srv:
        yield srv


def test_four_streamed_parallel_calls_against_the_protocol_server(server: ChatServer) -> None:
    server.strict = True  # HTTP 400 unless every call is answered right after its message
    server.stream_tool_calls(*[("wait", {"n": n}) for n in range(4)])
    server.stream_reply("all four done")
    barrier = Barrier(4)
    settings = {"model": "openai/m", "providers": {"openai": {"base_url": server.base_url}}}
    runner, _ = make_runner(agent=settings)
    runner.tools.add_python(barrier.tool, name="wait", description="W.")

    async def go() -> Any:
        return [e async for e in runner.stream("go", session_key="s1")]

    events = run(go())
    assert events[-1].reply == "all four done" and barrier.most == 4
    sent = [m for m in server.requests[1]["body"]["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in sent] == [f"result {n}" for n in range(4)]
