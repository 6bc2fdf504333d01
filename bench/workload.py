"""What the capacity benchmarks share: the turn they run, the measures they take.

Not a benchmark itself (``run.py`` does not run it). The turn is the one of issue 30: a
model that awaits :data:`MODEL_S` per call and asks for one tool call, then replies (two
calls, so :data:`MODEL_TOTAL_S` of every turn's latency is the model's own), one no-op
tool, and optionally 10 plugins with a no-op handler on every hook such a turn
dispatches. The same turn in PydanticAI: ``FunctionModel`` over an ``async`` function
awaiting the same time, and one tool.

Measures: CPU time (``time.process_time``, less sensitive to the machine's load than
wall time), event-loop lag (a task that sleeps :data:`LAG_TICK_S` and records how late
it wakes), resident memory from ``/proc/self/status`` (``VmRSS`` now, ``VmHWM`` the peak;
``reset_peak_rss`` restarts the peak where the kernel allows it) and the load average.
"""

from __future__ import annotations

import asyncio
import gc
import math
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from agentplug import Gateway, PluginApi
from agentplug.agent import ModelRequest, ModelResponse, ToolCall

MODEL_S = 0.050
"""What one model call awaits (stands for the model's latency)."""
MODEL_TOTAL_S = 2 * MODEL_S
"""The model's own share of every turn (two calls): subtracted from turn latencies."""
PLUGINS = 10
LAG_TICK_S = 0.010
TURN_HOOKS = (
    "inbound_claim",
    "message_received",
    "session_start",
    "agent_turn_prepare",
    "before_model_resolve",
    "before_prompt_build",
    "before_agent_run",
    "before_agent_reply",
    "before_message_write",
    "llm_input",
    "model_call_started",
    "model_call_ended",
    "llm_output",
    "before_tool_call",
    "after_tool_call",
    "tool_result_persist",
    "before_agent_finalize",
    "message_sending",
    "reply_payload_sending",
    "message_sent",
    "agent_end",
)
"""Every hook the benchmark's turn dispatches (29 dispatches, 22 hooks; ``session_start``
only on a session's first turn)."""

TurnFn = Callable[[str], Awaitable[None]]
"""Runs one turn of the session named by its argument."""


class SlowModel:
    """Asks for the ``noop`` tool, then replies once the tool answered; each call awaits
    :data:`MODEL_S`."""

    name = "bench"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        await asyncio.sleep(MODEL_S)
        last = request.messages[-1] if request.messages else {}
        if last.get("role") == "tool":
            return ModelResponse(text="done", usage={"completion_tokens": 1})
        return ModelResponse(tool_calls=[ToolCall("c1", "noop", {})])


def _noop(event: Any, ctx: Any) -> None:
    return None


def noop_plugin(api: PluginApi) -> None:
    """A plugin with a handler that returns nothing on every hook of the turn."""
    for hook in TURN_HOOKS:
        api.on(hook, _noop)


def agent_settings() -> dict[str, Any]:
    """The ``agent`` section: the bench model, no actions offered as tools."""
    return {"model": "bench/m", "tools": {"actions": False}}


def build_gateway(plugins: int, **parts: Any) -> Gateway:
    """A gateway running :class:`SlowModel` with the ``noop`` tool and ``plugins``
    no-op plugins; ``parts`` go to :class:`~agentplug.Gateway` (``store``, ...)."""
    gateway = Gateway(
        provider=SlowModel(), agent=agent_settings(), channel=lambda payload: None, **parts
    )
    for index in range(plugins):
        gateway.host.register(noop_plugin, f"noop-{index}")
    refused = [p.plugin_id for p in gateway.host.plugins if p.refused_hooks or p.error]
    assert not refused, f"plugins refused hooks: {refused}"
    gateway.runner.tools.add_python(lambda: "ok", name="noop", description="Do nothing.")
    return gateway


def agentplug_turn(gateway: Gateway) -> TurnFn:
    """One inbound message through ``gateway.runner`` (the path of any channel)."""
    runner = gateway.runner

    async def turn(session_key: str) -> None:
        result = await runner.handle_inbound(
            {"content": "hi", "session_key": session_key, "channel": "bench", "sender_id": "u"}
        )
        if result.status != "replied":
            raise RuntimeError(f"turn {result.status}: {result.error}")

    return turn


def pydantic_ai_turn() -> TurnFn:
    """The same turn in PydanticAI (raises ``ImportError`` without the extra); each
    conversation keeps its message history, as the runner keeps a transcript."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.messages import ModelResponse as PaiResponse
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    async def model(messages: list[ModelMessage], info: AgentInfo) -> PaiResponse:
        await asyncio.sleep(MODEL_S)
        if any(isinstance(part, ToolReturnPart) for part in messages[-1].parts):
            return PaiResponse(parts=[TextPart("done")])
        return PaiResponse(parts=[ToolCallPart("noop", {}, tool_call_id="c1")])

    agent: Agent[None, str] = Agent(FunctionModel(model))

    @agent.tool_plain
    def noop() -> str:
        """Do nothing."""
        return "ok"

    # One conversation held per session (``s<i>-c<k>``: session i, conversation k), as a
    # server holds its users' open conversations; the runner's are in its store.
    histories: dict[str, tuple[str, list[ModelMessage]]] = {}

    async def turn(session_key: str) -> None:
        session = session_key.partition("-c")[0]
        key, history = histories.get(session, ("", []))
        result = await agent.run("hi", message_history=history if key == session_key else None)
        histories[session] = (session_key, result.all_messages())
        if result.output != "done":
            raise RuntimeError(f"pydantic-ai turn answered {result.output!r}")

    return turn


# -- measures ---------------------------------------------------------------------------


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (``nan`` for no values)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(pct / 100 * len(ordered)))
    return ordered[rank - 1]


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_mib() -> float:
    """Resident memory now (``nan`` where ``/proc`` is missing)."""
    kib = _status_kib("VmRSS")
    return kib / 1024 if kib is not None else math.nan


def peak_rss_mib() -> float:
    """The peak resident memory of this process (since :func:`reset_peak_rss`)."""
    kib = _status_kib("VmHWM")
    if kib is None:
        import resource

        kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kib / 1024


def reset_peak_rss() -> bool:
    """Restart the peak at the current RSS (Linux >= 4.0); ``False`` when refused."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as refs:
            refs.write("5")
        return True
    except OSError:
        return False


def run_queue_wait_s() -> float:
    """Seconds this thread has spent runnable but waiting for a CPU (``/proc/thread-self/
    schedstat``; ``nan`` where missing): on a loaded machine, time lost to other processes."""
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as stat:
            return int(stat.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return math.nan


def load_average() -> list[float]:
    """The 1, 5 and 15 minute load averages (empty where unknown)."""
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


class LoopLag:
    """Samples how late a task sleeping :data:`LAG_TICK_S` wakes, while ``recording``."""

    def __init__(self) -> None:
        self.samples: list[float] = []
        self.recording = False
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        clock = time.perf_counter
        while True:
            started = clock()
            await asyncio.sleep(LAG_TICK_S)
            if self.recording:
                self.samples.append(clock() - started - LAG_TICK_S)

    def start(self) -> None:
        """Start sampling (records only while ``recording`` is true)."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop the sampling task."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


class GcCounter:
    """Garbage collections per generation between :meth:`start` and :meth:`stop`, and
    the CPU time they took (``time.thread_time``: the collector runs in the thread that
    triggered it, and CPU time does not count the time other processes had the core)."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self.seconds_by_generation = [0.0, 0.0, 0.0]
        self.longest = 0.0
        """The longest single collection (CPU seconds)."""
        self._started = 0.0
        self._on = False

    @property
    def seconds(self) -> float:
        """Time spent collecting, all generations."""
        return sum(self.seconds_by_generation)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if not self._on:
            return
        if phase == "start":
            self._started = time.thread_time()
        else:
            took = time.thread_time() - self._started
            self.counts[info["generation"]] += 1
            self.seconds_by_generation[info["generation"]] += took
            self.longest = max(self.longest, took)

    def start(self) -> None:
        """Start counting."""
        if self._callback not in gc.callbacks:
            gc.callbacks.append(self._callback)
        self._on = True

    def stop(self) -> None:
        """Stop counting."""
        self._on = False
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)
