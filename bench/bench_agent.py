"""The turn runner's overhead: one turn with 10 plugins vs the same turn with none.

A turn is a whole ``AgentRunner.run_turn``: the prompt hooks, two model calls of a
scripted in-process provider (a tool call, then the reply), one no-op tool through the
tool-call gate, finalize, delivery through the reply dispatcher, ``agent_end``. The
baseline runs it on a host without plugins; the measured run on a host with 10 plugins,
each with a handler (returning nothing) on eight hooks of the turn (decision, merge,
pipeline and observation hooks). Both are measured in the same process, interleaved, as
the median of many turns; the table reports the absolute added time per turn and the
ratio. Target: at most 1 ms added per turn.

Usage: ``python bench/bench_agent.py [--quick]``; importable as ``run(quick=False)``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from typing import Any

from agentplug import PluginApi, PluginHost
from agentplug.agent import AgentRunner, ModelRequest, ModelResponse, ToolCall

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
    """Odd calls ask for the no-op tool, even calls reply."""

    name = "scripted"

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.calls += 1
        if self.calls % 2:
            return ModelResponse(tool_calls=[ToolCall("c1", "noop", {})])
        return ModelResponse(text="done", usage={"completion_tokens": 1})


def _plugin(index: int) -> Any:
    def register(api: PluginApi) -> None:
        for hook in HOOKS:
            api.on(hook, lambda event, ctx: None)

    return register


def _runner(plugins: int) -> AgentRunner:
    host = PluginHost()
    for index in range(plugins):
        host.register(_plugin(index), f"plugin-{index}")
    runner = AgentRunner(host, LoopProvider(), config={"tools": {"actions": False}})
    runner.tools.add_python(lambda: "ok", name="noop", description="Do nothing.")
    runner.channel = lambda payload: None
    return runner


async def _measure(turns: int) -> dict[str, Any]:
    bare, loaded = _runner(0), _runner(10)
    for runner in (bare, loaded):  # warm-up
        for i in range(20):
            await runner.run_turn("hi", session_key=f"warm-{i}")
    samples: dict[str, list[float]] = {"bare": [], "loaded": []}
    clock = time.perf_counter
    for i in range(turns):
        for name, runner in (("bare", bare), ("loaded", loaded)):
            started = clock()
            result = await runner.run_turn("hi", session_key=f"s-{i}")
            samples[name].append(clock() - started)
            assert result.status == "replied", result.error
    bare_ms = statistics.median(samples["bare"]) * 1000
    loaded_ms = statistics.median(samples["loaded"]) * 1000
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
    }


def run(quick: bool = False) -> dict[str, Any]:
    """Measure (``quick``: fewer turns, noisier)."""
    return asyncio.run(_measure(60 if quick else 400))


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
        ]
    )


if __name__ == "__main__":
    outcome = run(quick="--quick" in sys.argv)
    print(format_table(outcome))
    print(json.dumps(outcome))
