"""Per-dispatch cost of ``PluginHost.dispatch`` against raw pluggy and a plain loop.

Everything runs inside ONE ``asyncio.run`` so the event loop is not part of the cost, and
every handler is a real plugin (one plugin object per handler) returning ``None``.

**Sequential hooks** (``before_tool_call``, a decision hook, and ``message_sending``, a
pipeline) with 1, 10 and 100 no-op handlers, dispatched with a pre-built event (the hook's
own model) and ctx. Per handler count, in one interleaved run:

* ``agentplug``: ``await host.dispatch(...)`` with ``async def`` handlers;
* ``agentplug_sync``: the same with plain ``def`` handlers;
* ``pluggy``: a bare ``pluggy.PluginManager`` with an equivalent hookspec and the ``def``
  handlers, ``pm.hook.<name>(event=..., ctx=...)``;
* ``pluggy_await``: the same manager over the ``async def`` handlers, every returned
  coroutine awaited (what pluggy costs for async handlers);
* ``loop``: ``for h in handlers: await h(event, ctx)`` over the async handlers.

Targets (issue 14): ``agentplug_sync / pluggy`` <= 1.0 at 10 and 100 handlers and <= 1.5
at 1; ``agentplug / pluggy_await`` <= 1.0 at 10 and 100.

**Observation hook** ``message_received`` with 1, 10 and 100 no-op handlers, the same five
variants; target ``agentplug / pluggy`` <= 1.2 at 10 and 100 (async handlers against raw
pluggy's sync calls, as the issue measures it).

**Observation wall time** ``after_tool_call`` with 100 handlers that each ``await
asyncio.sleep(0.010)``, next to ``asyncio.gather`` of the same coroutines (target < 15 ms).

Variants are interleaved round-robin inside every repeat; each repeat times a block of
dispatches and keeps its mean; times are medians over repeats after a warm-up; ratios are
the median of per-repeat ratios (variants of one repeat ran back to back).

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
TARGET_OBSERVE_MS = 15.0
SLEEP_S = 0.010

# (row key, handler count) -> maximum ratio; the variant pair each target compares.
SEQUENTIAL_TARGETS = {
    ("sync_vs_pluggy", 1): 1.5,
    ("sync_vs_pluggy", 10): 1.0,
    ("sync_vs_pluggy", 100): 1.0,
    ("async_vs_pluggy_await", 10): 1.0,
    ("async_vs_pluggy_await", 100): 1.0,
}
OBSERVE_TARGETS = {("async_vs_pluggy", 10): 1.2, ("async_vs_pluggy", 100): 1.2}

_spec = pluggy.HookspecMarker("benchraw")
_impl = pluggy.HookimplMarker("benchraw")


class _RawSpec:
    """Hookspecs equivalent to agentplug's (same names and argument names)."""

    @_spec
    def before_tool_call(self, event: Any, ctx: Any) -> Any:
        """Decision hook."""

    @_spec
    def message_sending(self, event: Any, ctx: Any) -> Any:
        """Pipeline hook."""

    @_spec
    def message_received(self, event: Any, ctx: Any) -> Any:
        """Observation hook."""


class _Plugin:
    """A plugin object with one handler (each instance is a separate plugin)."""

    def __init__(self, name: str, function: Callable[..., Any]) -> None:
        self.plugin_id = name
        setattr(self, function.__name__, function)


def noop_handler(hook: str, i: int, *, is_async: bool) -> Callable[..., Any]:
    """A handler of ``hook`` that does nothing (sync or async), named for plugin ``i``."""
    if is_async:

        async def handler(event: Any, ctx: Any) -> None:
            return None

    else:

        def handler(event: Any, ctx: Any) -> None:  # type: ignore[misc]
            return None

    handler.__name__ = hook
    handler.__qualname__ = f"noop_{i}.{hook}"
    return handler


def _async_sleeper(i: int) -> Callable[..., Awaitable[None]]:
    async def after_tool_call(event: Any, ctx: Any) -> None:
        await asyncio.sleep(SLEEP_S)

    after_tool_call.__qualname__ = f"sleeper_{i}.after_tool_call"
    return after_tool_call


def agentplug_host(functions: list[Callable[..., Any]]) -> PluginHost:
    """A host with one plugin per function (each registered as its hook)."""
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


def timer_async(call: Callable[[], Awaitable[Any]]) -> Timer:
    """A timer awaiting ``call`` ``n`` times; it returns the seconds taken."""

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


async def interleaved(
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


def paired_ratio(values: list[float], baseline: list[float]) -> float:
    """Median of the per-repeat ratios ``values[i] / baseline[i]``."""
    return statistics.median(v / b for v, b in zip(values, baseline, strict=True))


def _events(host: PluginHost, hook: str) -> tuple[Any, Any]:
    decl = host.declarations[hook]
    if hook == "before_tool_call":
        event = decl.event(tool_name="exec", params=PARAMS)
        ctx = decl.ctx(agent_id="bench", session_key="s1", run_id="r1")
    else:
        event = decl.event(content="hello there", channel="cli", metadata={"lang": "en"})
        ctx = decl.ctx(session_key="s1", run_id="r1", channel="cli")
    return event, ctx


def _check(result: Any, count: int) -> None:
    """Guard against benchmarking a broken setup: every handler ran and returned OK."""
    statuses = [record[1].value for record in result.records]
    if statuses != ["ok"] * count or getattr(result.outcome, "blocked", False):
        raise RuntimeError(f"benchmark setup broken: {count} handlers gave {statuses}")


async def _variants(hook: str, count: int) -> dict[str, Timer]:
    """The five timed variants of ``hook`` with ``count`` handlers, on the same functions."""
    async_fns = [noop_handler(hook, i, is_async=True) for i in range(count)]
    sync_fns = [noop_handler(hook, i, is_async=False) for i in range(count)]
    host = agentplug_host(async_fns)
    host_sync = agentplug_host(sync_fns)
    pm = _raw_pluggy(sync_fns)
    pm_async = _raw_pluggy(async_fns)
    event, ctx = _events(host, hook)
    assert len(host.plan(hook)) == count
    assert len(getattr(pm.hook, hook).get_hookimpls()) == count
    _check(await host.dispatch(hook, event, ctx), count)
    _check(await host_sync.dispatch(hook, event, ctx), count)

    dispatch = host.dispatch
    dispatch_sync = host_sync.dispatch
    raw = getattr(pm.hook, hook)
    raw_async = getattr(pm_async.hook, hook)
    handlers = [h.function for h in host.plan(hook)]

    # ``.outcome`` is read, as a host would: the reduced outcome is part of the cost.
    async def agentplug() -> Any:
        return (await dispatch(hook, event, ctx)).outcome

    async def agentplug_sync() -> Any:
        return (await dispatch_sync(hook, event, ctx)).outcome

    def pluggy_call() -> Any:
        return raw(event=event, ctx=ctx)

    async def pluggy_await() -> None:
        for coro in raw_async(event=event, ctx=ctx):
            await coro

    async def loop() -> None:
        for h in handlers:
            await h(event, ctx)

    return {
        "agentplug": timer_async(agentplug),
        "agentplug_sync": timer_async(agentplug_sync),
        "pluggy": _timer_sync(pluggy_call),
        "pluggy_await": timer_async(pluggy_await),
        "loop": timer_async(loop),
    }


async def _per_count(hook: str, quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for count in COUNTS:
        variants = await _variants(hook, count)
        # ~10-30 ms per timed block on this class of machine.
        n = {1: 2000, 10: 1000, 100: 150}[count]
        repeats = 5 if quick else 15
        if quick:
            n //= 4
        samples = await interleaved(variants, n, repeats, warmup=max(n // 2, 50))
        row: dict[str, Any] = {"handlers": count, "dispatches_per_repeat": n, "repeats": repeats}
        for name, values in samples.items():
            row[f"{name}_us"] = statistics.median(values) * 1e6
            row[f"{name}_us_min"] = min(values) * 1e6
        row["async_vs_pluggy"] = paired_ratio(samples["agentplug"], samples["pluggy"])
        row["sync_vs_pluggy"] = paired_ratio(samples["agentplug_sync"], samples["pluggy"])
        row["async_vs_pluggy_await"] = paired_ratio(samples["agentplug"], samples["pluggy_await"])
        row["async_vs_loop"] = paired_ratio(samples["agentplug"], samples["loop"])
        row["pluggy_await_vs_pluggy"] = paired_ratio(samples["pluggy_await"], samples["pluggy"])
        out[str(count)] = row
    return out


def _targets(rows: dict[str, Any], targets: dict[tuple[str, int], float]) -> list[dict[str, Any]]:
    checked = []
    for (key, count), limit in targets.items():
        value = rows[str(count)][key]
        checked.append(
            {"ratio": key, "handlers": count, "max": limit, "value": value, "met": value <= limit}
        )
    return checked


async def _observe_sleep(quick: bool) -> dict[str, Any]:
    count = 100
    host = agentplug_host([_async_sleeper(i) for i in range(count)])
    decl = host.declarations["after_tool_call"]
    event = decl.event(tool_name="exec", params=PARAMS, result={"ok": True}, duration_ms=12.5)
    ctx = decl.ctx(agent_id="bench", session_key="s1", run_id="r1")
    handlers = [h.function for h in host.plan("after_tool_call")]
    _check(await host.dispatch("after_tool_call", event, ctx), count)

    async def agentplug() -> None:
        await host.dispatch("after_tool_call", event, ctx)

    async def gather() -> None:
        await asyncio.gather(*(h(event, ctx) for h in handlers))

    variants = {"agentplug": timer_async(agentplug), "gather": timer_async(gather)}
    n, repeats = (2, 5) if quick else (5, 12)
    samples = await interleaved(variants, n, repeats, warmup=3)
    row: dict[str, Any] = {"handlers": count, "sleep_ms": SLEEP_S * 1000, "repeats": repeats}
    for name, values in samples.items():
        row[f"{name}_ms"] = statistics.median(values) * 1e3
        row[f"{name}_ms_max"] = max(values) * 1e3
    row["overhead_ms"] = statistics.median(
        (a - g) * 1e3 for a, g in zip(samples["agentplug"], samples["gather"], strict=True)
    )
    row["ratio_vs_gather"] = paired_ratio(samples["agentplug"], samples["gather"])
    row["target_ms"] = TARGET_OBSERVE_MS
    row["meets_target"] = row["agentplug_ms"] < TARGET_OBSERVE_MS
    return row


def run(quick: bool = False) -> dict[str, Any]:
    """Run every measurement; return a JSON-serialisable dict (see the module docstring).

    Keys: ``sequential`` and ``message_sending`` and ``observe_noop`` (per handler count:
    ``<variant>_us`` medians and ``<variant>_us_min`` minima in µs per dispatch, and the
    paired ratios ``sync_vs_pluggy``, ``async_vs_pluggy``, ``async_vs_pluggy_await``,
    ``async_vs_loop``), ``observe`` (the sleeping ``after_tool_call`` row) and ``targets``
    (every target with its value and whether it was met).
    """

    async def main() -> dict[str, Any]:
        return {
            "sequential": await _per_count("before_tool_call", quick),
            "message_sending": await _per_count("message_sending", quick),
            "observe_noop": await _per_count("message_received", quick),
            "observe": await _observe_sleep(quick),
        }

    result = asyncio.run(main())
    result["targets"] = {
        "before_tool_call": _targets(result["sequential"], SEQUENTIAL_TARGETS),
        "message_sending": _targets(result["message_sending"], SEQUENTIAL_TARGETS),
        "message_received": _targets(result["observe_noop"], OBSERVE_TARGETS),
        "after_tool_call_100x10ms_max_ms": TARGET_OBSERVE_MS,
        "after_tool_call_met": result["observe"]["meets_target"],
    }
    result["quick"] = quick
    result["python"] = sys.version.split()[0]
    result["pluggy"] = pluggy.__version__
    return result


def _rows(title: str, rows: dict[str, Any]) -> list[str]:
    lines = [
        title,
        f"{'handlers':>8} {'agentplug':>10} {'ap(sync)':>9} {'pluggy':>8} {'pl+await':>9}"
        f" {'loop':>8} {'sync/pl':>8} {'async/pl':>9} {'async/pl+aw':>12} {'async/loop':>11}",
    ]
    for row in rows.values():
        lines.append(
            f"{row['handlers']:>8} {row['agentplug_us']:>10.2f} {row['agentplug_sync_us']:>9.2f}"
            f" {row['pluggy_us']:>8.2f} {row['pluggy_await_us']:>9.2f} {row['loop_us']:>8.2f}"
            f" {row['sync_vs_pluggy']:>7.2f}x {row['async_vs_pluggy']:>8.2f}x"
            f" {row['async_vs_pluggy_await']:>11.2f}x {row['async_vs_loop']:>10.2f}x"
        )
    return lines


def _target_lines(checked: list[dict[str, Any]]) -> list[str]:
    return [
        f"  target {t['ratio']} at {t['handlers']} <= {t['max']:.1f}: {t['value']:.2f}x "
        f"{'MET' if t['met'] else 'MISSED'}"
        for t in checked
    ]


def format_table(result: dict[str, Any]) -> str:
    """The human-readable tables of a :func:`run` result."""
    t = result["targets"]
    lines = _rows(
        "before_tool_call (decision), no-op handlers: median µs per dispatch; ratios are "
        "medians of per-repeat ratios",
        result["sequential"],
    )
    lines += _target_lines(t["before_tool_call"])
    lines += _rows("message_sending (pipeline), no-op handlers", result["message_sending"])
    lines += _target_lines(t["message_sending"])
    lines += _rows("message_received (observation), no-op handlers", result["observe_noop"])
    lines += _target_lines(t["message_received"])
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
