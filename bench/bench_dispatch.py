"""Per-dispatch cost of ``PluginHost.dispatch`` against raw pluggy and a plain loop.

Two measurements, all inside ONE ``asyncio.run`` so the event loop is not part of the cost:

``before_tool_call`` (a sequential *decide* hook) with 1, 10 and 100 no-op handlers, each a
real plugin (``@hookimpl async def before_tool_call(event, ctx): return None``), dispatched
with a pre-built event (the hook's own event model) and ctx, so validation is skipped just
as it is for a host that builds its events once. Baselines on the same handlers, same run:

* ``pluggy``: a bare ``pluggy.PluginManager`` with an equivalent hookspec and the handlers
  as *sync* functions, called as ``pm.hook.before_tool_call(event=..., ctx=...)``;
* ``loop``: ``for h in handlers: await h(event, ctx)`` over the async handlers.

An extra row, ``agentplug_sync``, dispatches the same hook with the *sync* handlers through
agentplug (informational: isolates the coroutine cost from the framework cost).

``after_tool_call`` (a concurrent *observation* hook) with 100 handlers that each
``await asyncio.sleep(0.010)``: wall time per dispatch next to ``asyncio.gather`` of the same
100 coroutines (the floor is ~10 ms plus the loop's scheduling of 100 timers).

Variants are interleaved round-robin inside every repeat (so drift on a noisy machine hits
all of them alike); each repeat times a block of dispatches and reports its mean; times are
the median over repeats, after a warm-up; ratios are the median of the per-repeat ratios
(each repeat's variants ran back to back, so load shifts cancel out).

Usage: ``python bench/bench_dispatch.py [--quick]``; importable as ``run(quick=False)``.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pluggy
from agentplug import PluginHost, hookimpl

COUNTS = (1, 10, 100)
PARAMS = {"command": "ls -la", "cwd": "/tmp", "timeout": 30, "env": {"LANG": "C"}}
TARGET_RATIO_VS_PLUGGY_AT_10 = 1.0
TARGET_OBSERVE_MS = 15.0
SLEEP_S = 0.010

_spec = pluggy.HookspecMarker("benchraw")
_impl = pluggy.HookimplMarker("benchraw")


class _RawSpec:
    @_spec
    def before_tool_call(self, event: Any, ctx: Any) -> Any:
        """Equivalent of agentplug's hookspec (same argument names)."""


class _Plugin:
    """A plugin object with one handler (each instance is a separate plugin)."""

    def __init__(self, name: str, function: Callable[..., Any]) -> None:
        self.plugin_id = name
        setattr(self, function.__name__, function)


def _async_noop(i: int) -> Callable[..., Awaitable[None]]:
    async def before_tool_call(event: Any, ctx: Any) -> None:
        return None

    before_tool_call.__qualname__ = f"noop_{i}.before_tool_call"
    return before_tool_call


def _sync_noop(i: int) -> Callable[..., None]:
    def before_tool_call(event: Any, ctx: Any) -> None:
        return None

    before_tool_call.__qualname__ = f"sync_noop_{i}.before_tool_call"
    return before_tool_call


def _async_sleeper(i: int) -> Callable[..., Awaitable[None]]:
    async def after_tool_call(event: Any, ctx: Any) -> None:
        await asyncio.sleep(SLEEP_S)

    after_tool_call.__qualname__ = f"sleeper_{i}.after_tool_call"
    return after_tool_call


def _agentplug_host(functions: list[Callable[..., Any]]) -> PluginHost:
    host = PluginHost()
    for i, fn in enumerate(functions):
        host.register(_Plugin(f"p{i:03d}", hookimpl(fn)), f"p{i:03d}")
    return host


def _raw_pluggy(functions: list[Callable[..., Any]]) -> pluggy.PluginManager:
    pm = pluggy.PluginManager("benchraw")
    pm.add_hookspecs(_RawSpec)
    for i, fn in enumerate(functions):
        pm.register(_Plugin(f"r{i:03d}", _impl(fn)), name=f"r{i:03d}")
    return pm


Timer = Callable[[int], Awaitable[float]]


def _timer_async(call: Callable[[], Awaitable[Any]]) -> Timer:
    async def timed(n: int) -> float:
        clock = time.perf_counter
        start = clock()
        for _ in range(n):
            await call()
        return clock() - start

    return timed


def _timer_sync(call: Callable[[], Any]) -> Timer:
    async def timed(n: int) -> float:
        clock = time.perf_counter
        start = clock()
        for _ in range(n):
            call()
        return clock() - start

    return timed


async def _interleaved(
    variants: dict[str, Timer], n: int, repeats: int, warmup: int
) -> dict[str, list[float]]:
    """Seconds per call for every repeat of every variant (round-robin order)."""
    for timed in variants.values():
        await timed(warmup)
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(repeats):
        gc.collect()
        for name, timed in variants.items():
            samples[name].append(await timed(n) / n)
    return samples


def _paired(values: list[float], baseline: list[float]) -> float:
    """Median of the per-repeat ratios ``values[i] / baseline[i]``."""
    return statistics.median(v / b for v, b in zip(values, baseline, strict=True))


def _check_equivalent(host: PluginHost, count: int, event: Any, ctx: Any) -> None:
    """Guard against benchmarking a broken setup: every handler must run and return OK."""

    async def once() -> Any:
        return await host.dispatch("before_tool_call", event, ctx)

    result = asyncio.run(once())
    statuses = [record[1].value for record in result.records]
    if statuses != ["ok"] * count or result.outcome.blocked:
        raise RuntimeError(f"benchmark setup broken: {count} handlers gave {statuses}")


def _variants(count: int) -> dict[str, Timer]:
    """The four timed variants for ``count`` handlers, built on the same handler functions."""
    async_fns = [_async_noop(i) for i in range(count)]
    sync_fns = [_sync_noop(i) for i in range(count)]
    host = _agentplug_host(async_fns)
    host_sync = _agentplug_host(sync_fns)
    pm = _raw_pluggy(sync_fns)
    decl = host.declarations["before_tool_call"]
    event = decl.event(tool_name="exec", params=PARAMS)
    ctx = decl.ctx(agent_id="bench", session_key="s1", run_id="r1")
    assert len(host.plan("before_tool_call")) == count
    assert len(pm.hook.before_tool_call.get_hookimpls()) == count

    dispatch = host.dispatch
    dispatch_sync = host_sync.dispatch
    hook = pm.hook.before_tool_call
    # The plain-loop baseline awaits exactly the functions agentplug registered.
    handlers = [h.function for h in host.plan("before_tool_call")]

    # ``.outcome`` is read, as a host would: the reduced outcome is part of the cost.
    async def agentplug() -> Any:
        return (await dispatch("before_tool_call", event, ctx)).outcome

    async def agentplug_sync() -> Any:
        return (await dispatch_sync("before_tool_call", event, ctx)).outcome

    def pluggy_call() -> Any:
        return hook(event=event, ctx=ctx)

    async def loop() -> None:
        for h in handlers:
            await h(event, ctx)

    return {
        "agentplug": _timer_async(agentplug),
        "agentplug_sync": _timer_async(agentplug_sync),
        "pluggy": _timer_sync(pluggy_call),
        "loop": _timer_async(loop),
    }


async def _sequential(quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for count in COUNTS:
        variants = _variants(count)
        # ~20-30 ms per timed block at 10 handlers on this class of machine.
        n = {1: 2000, 10: 1000, 100: 150}[count]
        repeats = 5 if quick else 15
        if quick:
            n //= 4
        samples = await _interleaved(variants, n, repeats, warmup=max(n // 2, 50))
        row: dict[str, Any] = {"handlers": count, "dispatches_per_repeat": n, "repeats": repeats}
        for name, values in samples.items():
            row[f"{name}_us"] = statistics.median(values) * 1e6
            row[f"{name}_us_min"] = min(values) * 1e6
        # Ratios are paired per repeat (the variants ran back to back), then the median is
        # taken: steadier than a ratio of medians when the machine's load shifts mid-run.
        row["ratio_vs_pluggy"] = _paired(samples["agentplug"], samples["pluggy"])
        row["ratio_vs_loop"] = _paired(samples["agentplug"], samples["loop"])
        row["sync_ratio_vs_pluggy"] = _paired(samples["agentplug_sync"], samples["pluggy"])
        row["ratio_of_medians_vs_pluggy"] = row["agentplug_us"] / row["pluggy_us"]
        out[str(count)] = row
    return out


async def _observe(quick: bool) -> dict[str, Any]:
    count = 100
    fns = [_async_sleeper(i) for i in range(count)]
    host = _agentplug_host(fns)
    decl = host.declarations["after_tool_call"]
    event = decl.event(tool_name="exec", params=PARAMS, result={"ok": True}, duration_ms=12.5)
    ctx = decl.ctx(agent_id="bench", session_key="s1", run_id="r1")
    handlers = [h.function for h in host.plan("after_tool_call")]
    assert len(handlers) == count

    first = await host.dispatch("after_tool_call", event, ctx)
    statuses = {record[1].value for record in first.records}
    if statuses != {"ok"} or len(first.records) != count:
        raise RuntimeError(f"observation benchmark setup broken: {statuses}")

    async def agentplug() -> None:
        await host.dispatch("after_tool_call", event, ctx)

    async def gather() -> None:
        await asyncio.gather(*(h(event, ctx) for h in handlers))

    variants = {"agentplug": _timer_async(agentplug), "gather": _timer_async(gather)}
    n, repeats = (2, 5) if quick else (5, 12)
    samples = await _interleaved(variants, n, repeats, warmup=3)
    row: dict[str, Any] = {"handlers": count, "sleep_ms": SLEEP_S * 1000, "repeats": repeats}
    for name, values in samples.items():
        row[f"{name}_ms"] = statistics.median(values) * 1e3
        row[f"{name}_ms_max"] = max(values) * 1e3
    row["overhead_ms"] = statistics.median(
        (a - g) * 1e3 for a, g in zip(samples["agentplug"], samples["gather"], strict=True)
    )
    row["ratio_vs_gather"] = _paired(samples["agentplug"], samples["gather"])
    row["target_ms"] = TARGET_OBSERVE_MS
    row["meets_target"] = row["agentplug_ms"] < TARGET_OBSERVE_MS
    return row


def run(quick: bool = False) -> dict[str, Any]:
    """Run both measurements; return a JSON-serialisable dict (see the module docstring).

    Keys: ``sequential`` (per handler count: ``agentplug_us``, ``pluggy_us``, ``loop_us``,
    ``agentplug_sync_us``, medians in µs per dispatch, ``*_us_min``, ``ratio_vs_pluggy``,
    ``ratio_vs_loop``), ``observe`` (``agentplug_ms``, ``gather_ms``, ``overhead_ms``,
    ``meets_target``) and ``targets``.
    """
    # Setup sanity: every handler runs OK, nothing blocked (outside the timed loop).
    for count in COUNTS:
        host = _agentplug_host([_async_noop(i) for i in range(count)])
        decl = host.declarations["before_tool_call"]
        _check_equivalent(
            host, count, decl.event(tool_name="exec", params=PARAMS), decl.ctx(agent_id="b")
        )

    async def main() -> dict[str, Any]:
        return {"sequential": await _sequential(quick), "observe": await _observe(quick)}

    result = asyncio.run(main())
    at10 = result["sequential"]["10"]["ratio_vs_pluggy"]
    result["targets"] = {
        "ratio_vs_pluggy_at_10_max": TARGET_RATIO_VS_PLUGGY_AT_10,
        "ratio_vs_pluggy_at_10": at10,
        "ratio_vs_pluggy_at_10_met": at10 <= TARGET_RATIO_VS_PLUGGY_AT_10,
        "observe_100x10ms_max_ms": TARGET_OBSERVE_MS,
        "observe_met": result["observe"]["meets_target"],
    }
    result["quick"] = quick
    result["python"] = sys.version.split()[0]
    result["pluggy"] = pluggy.__version__
    return result


def format_table(result: dict[str, Any]) -> str:
    """The human-readable table of a :func:`run` result."""
    lines = [
        "before_tool_call dispatch, no-op handlers (median µs per dispatch; ratios are the "
        "median of per-repeat ratios)",
        f"{'handlers':>8} {'agentplug':>10} {'ap(sync)':>10} {'pluggy':>9} {'loop':>9}"
        f" {'ap/pluggy':>10} {'ap/loop':>8}",
    ]
    for row in result["sequential"].values():
        lines.append(
            f"{row['handlers']:>8} {row['agentplug_us']:>10.2f} {row['agentplug_sync_us']:>10.2f}"
            f" {row['pluggy_us']:>9.2f} {row['loop_us']:>9.2f}"
            f" {row['ratio_vs_pluggy']:>9.2f}x {row['ratio_vs_loop']:>7.2f}x"
        )
    t = result["targets"]
    lines.append(
        f"target ap/pluggy at 10 handlers <= {t['ratio_vs_pluggy_at_10_max']:.1f}: "
        f"{t['ratio_vs_pluggy_at_10']:.2f}x -> "
        f"{'MET' if t['ratio_vs_pluggy_at_10_met'] else 'MISSED'}"
    )
    o = result["observe"]
    lines.append(
        f"after_tool_call, {o['handlers']} handlers x sleep({o['sleep_ms']:.0f} ms): agentplug "
        f"{o['agentplug_ms']:.2f} ms, asyncio.gather {o['gather_ms']:.2f} ms "
        f"(+{o['overhead_ms']:.2f} ms, {o['ratio_vs_gather']:.2f}x); target < "
        f"{o['target_ms']:.0f} ms -> {'MET' if o['meets_target'] else 'MISSED'}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_table(run(quick="--quick" in sys.argv[1:])))
