"""The turn runner's overhead: one turn with 10 plugins vs the same turn with none, and
the streamed and parallel-tool variants of the turn with 10 plugins against the plain one.

A turn is a whole ``AgentRunner.run_turn``: the prompt hooks, two model calls of a
scripted in-process provider (a tool call, then the reply), one no-op tool through the
tool-call gate, finalize, delivery through the reply dispatcher, ``agent_end``. The
baseline runs it on a host without plugins; the measured run on a host with 10 plugins,
each with a handler (returning nothing) on eight hooks of the turn (decision, merge,
pipeline and observation hooks). Both are measured in the same process, interleaved, as
the median of many turns; the table reports the absolute added time per turn and the
ratio. Target: at most 1 ms added per turn.

The sub-agent turn (:func:`measure_subagent`): the model calls a configured sub-agent as
a tool, the sub-agent's own turn answers (its own hooks, session and transcript), and the
model replies: three model calls and two turns, against the plain turn above (two model
calls, one no-op tool), both on a gateway without plugins and with the 10 plugins.

Two variants run on the 10-plugin host, interleaved with the plain turn and reported as a
ratio to it: a **streamed** turn (``runner.stream``, every event consumed; the reply comes
in five deltas, and since the plugins implement ``message_sending`` the text goes out as
a block through the delivery hooks) and a turn whose first response asks for **4 tool
calls** at once (gated in call order, run side by side, answered in call order).

Usage: ``python bench/bench_agent.py [--quick]``; importable as ``run(quick=False)``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

from agentplug import Gateway, PluginApi, PluginHost
from agentplug.agent import (
    AgentRunner,
    FinalReply,
    ModelDelta,
    ModelRequest,
    ModelResponse,
    ToolCall,
)

TARGET_ADDED_MS = 1.0
HOOKS = (
    "agent_turn_prepare",
    "before_prompt_build",
    "before_agent_run",
    "before_tool_call",
    "after_tool_call",
    "message_sending",
    "llm_output",
    "agent_end",
)


class LoopProvider:
    """Odd calls ask for the no-op tool (``tools`` calls of it), even calls reply."""

    name = "scripted"

    def __init__(self, tools: int = 1) -> None:
        self.calls = 0
        self.tools = tools

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.calls % 2:
            calls = [ToolCall(f"c{i}", "noop", {}) for i in range(self.tools)]
            return ModelResponse(tool_calls=calls)
        return ModelResponse(text=REPLY, usage={"completion_tokens": 5})

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelDelta | ModelResponse]:
        """The same response, its text in word deltas."""
        response = await self.complete(request)
        for word in response.text.split(" "):
            yield ModelDelta(word + " ")
        yield response


REPLY = "the job is done now"


def _plugin(index: int) -> Any:
    def register(api: PluginApi) -> None:
        for hook in HOOKS:
            api.on(hook, lambda event, ctx: None)

    return register


def _runner(plugins: int, tools: int = 1) -> AgentRunner:
    host = PluginHost()
    for index in range(plugins):
        host.register(_plugin(index), f"plugin-{index}")
    runner = AgentRunner(host, LoopProvider(tools), config={"tools": {"actions": False}})

    runner.tools.add_python(lambda: "ok", name="noop", description="Do nothing.")
    runner.channel = lambda payload: None
    return runner


async def _streamed(runner: AgentRunner, session_key: str) -> str:
    status = ""
    async for event in runner.stream("hi", session_key=session_key):
        if isinstance(event, FinalReply):
            status = event.status
    return status


async def _measure(turns: int) -> dict[str, Any]:
    bare, loaded = _runner(0), _runner(10)
    streamed, parallel = _runner(10), _runner(10, tools=4)
    for runner in (bare, loaded, parallel):  # warm-up
        for i in range(20):
            await runner.run_turn("hi", session_key=f"warm-{i}")
    for i in range(20):
        await _streamed(streamed, f"warm-{i}")
    samples: dict[str, list[float]] = {"bare": [], "loaded": [], "streamed": [], "parallel": []}
    clock = time.perf_counter
    for i in range(turns):
        for name, runner in (("bare", bare), ("loaded", loaded), ("parallel", parallel)):
            started = clock()
            result = await runner.run_turn("hi", session_key=f"s-{i}")
            samples[name].append(clock() - started)
            assert result.status == "replied", result.error
        started = clock()
        status = await _streamed(streamed, f"s-{i}")
        samples["streamed"].append(clock() - started)
        assert status == "replied", status
    bare_ms = statistics.median(samples["bare"]) * 1000
    loaded_ms = statistics.median(samples["loaded"]) * 1000
    streamed_ms = statistics.median(samples["streamed"]) * 1000
    parallel_ms = statistics.median(samples["parallel"]) * 1000
    added = loaded_ms - bare_ms
    return {
        "turns": turns,
        "plugins": 10,
        "handlers_per_plugin": len(HOOKS),
        "bare_ms": round(bare_ms, 3),
        "plugins_ms": round(loaded_ms, 3),
        "added_ms": round(added, 3),
        "ratio": round(loaded_ms / bare_ms, 3) if bare_ms else None,
        "target_added_ms": TARGET_ADDED_MS,
        "meets_target": added <= TARGET_ADDED_MS,
        "streamed_ms": round(streamed_ms, 3),
        "streamed_ratio": round(streamed_ms / loaded_ms, 3) if loaded_ms else None,
        "parallel4_ms": round(parallel_ms, 3),
        "parallel4_ratio": round(parallel_ms / loaded_ms, 3) if loaded_ms else None,
    }


class SubagentModel:
    """The main agent asks the researcher, the researcher answers, the main agent replies."""

    name = "scripted"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        first = request.messages[0]
        if first.get("role") == "system" and first.get("content") == RESEARCHER_PROMPT:
            return ModelResponse(text="found it", usage={"completion_tokens": 2})
        if request.messages[-1].get("role") == "tool":
            return ModelResponse(text="done", usage={"completion_tokens": 1})
        return ModelResponse(tool_calls=[ToolCall("c1", "researcher", {"task": "look it up"})])


RESEARCHER_PROMPT = "You research."


def _subagent_runner(plugins: int) -> AgentRunner:
    config = {
        "tools": {"actions": False},
        "subagents": {
            "researcher": {
                "description": "Finds facts.",
                "system_prompt": RESEARCHER_PROMPT,
                "tools": {"actions": False},
            }
        },
    }
    gateway = Gateway.from_config({"agent": config})
    for index in range(plugins):
        gateway.host.register(_plugin(index), f"plugin-{index}")
    runner = gateway.runner_for(SubagentModel())
    runner.channel = lambda payload: None
    return runner


async def measure_subagent(turns: int) -> dict[str, Any]:
    """The sub-agent turn against the plain turn, with and without 10 plugins (medians)."""
    runners = {
        "plain_bare": _runner(0),
        "subagent_bare": _subagent_runner(0),
        "plain_plugins": _runner(10),
        "subagent_plugins": _subagent_runner(10),
    }
    for runner in runners.values():  # warm-up
        for i in range(20):
            await runner.run_turn("hi", session_key=f"warm-{i}")
    samples: dict[str, list[float]] = {name: [] for name in runners}
    clock = time.perf_counter
    for i in range(turns):
        for name, runner in runners.items():
            started = clock()
            result = await runner.run_turn("hi", session_key=f"s-{i}")
            samples[name].append(clock() - started)
            assert result.status == "replied", result.error
    ms = {name: statistics.median(values) * 1000 for name, values in samples.items()}
    return {
        "turns": turns,
        **{f"{name}_ms": round(value, 3) for name, value in ms.items()},
        "ratio_bare": round(ms["subagent_bare"] / ms["plain_bare"], 3),
        "ratio_plugins": round(ms["subagent_plugins"] / ms["plain_plugins"], 3),
    }


def run(quick: bool = False) -> dict[str, Any]:
    """Measure (``quick``: fewer turns, noisier)."""
    turns = 60 if quick else 400
    result = asyncio.run(_measure(turns))
    result["subagent"] = asyncio.run(measure_subagent(turns // 2))
    return result


def format_table(result: dict[str, Any]) -> str:
    """A short table of the measurement."""
    verdict = "MET" if result["meets_target"] else "MISSED"
    return "\n".join(
        [
            "agent turn (scripted model, 1 no-op tool call, 2 model calls), median of "
            f"{result['turns']} turns:",
            f"  no plugins:                        {result['bare_ms']:.3f} ms",
            f"  10 plugins x {result['handlers_per_plugin']} handlers:           "
            f"{result['plugins_ms']:.3f} ms",
            f"  added per turn:                    {result['added_ms']:.3f} ms "
            f"({result['ratio']:.2f}x)  target <= {result['target_added_ms']:.1f} ms {verdict}",
            f"  streamed (10 plugins, 5 deltas):   {result['streamed_ms']:.3f} ms "
            f"({result['streamed_ratio']:.2f}x the plain turn)",
            f"  4 parallel tool calls (10 plugins): {result['parallel4_ms']:.3f} ms "
            f"({result['parallel4_ratio']:.2f}x the plain turn)",
            *_subagent_lines(result.get("subagent")),
        ]
    )


def _subagent_lines(sub: dict[str, Any] | None) -> list[str]:
    if not sub:
        return []
    return [
        f"sub-agent turn (3 model calls, 2 turns) vs the plain turn, median of {sub['turns']}:",
        f"  no plugins:                        {sub['subagent_bare_ms']:.3f} vs "
        f"{sub['plain_bare_ms']:.3f} ms ({sub['ratio_bare']:.2f}x)",
        f"  10 plugins:                        {sub['subagent_plugins_ms']:.3f} vs "
        f"{sub['plain_plugins_ms']:.3f} ms ({sub['ratio_plugins']:.2f}x)",
    ]


if __name__ == "__main__":
    outcome = run(quick="--quick" in sys.argv)
    print(format_table(outcome))
    print(json.dumps(outcome))
