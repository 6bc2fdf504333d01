"""Host services: approval round-trip latency and state-store throughput.

``approval``: one ``ApprovalBroker.request`` through a :class:`ProgrammaticResolver`
whose ``on_pending`` callback answers ``allow-once`` at once (the "person" is
instantaneous, so this is the framework's own cost: pending registration, the
resolver task, the cross-thread-safe hand-off, ``on_resolution``). Median and p95 of
N round-trips in one event loop, after a warm-up. A second row, ``gate``, times a full
``ToolCallGate.check`` (one trusted policy + one ``before_tool_call`` handler asking
approval + the round-trip).

``sqlite``: ``SQLiteStore.put`` and ``SQLiteStore.append`` throughput (ops/s, every
operation its own committed ``BEGIN IMMEDIATE`` transaction with ``synchronous=FULL``,
i.e. one fsync per write) on a temporary file, and the same on ``MemoryStore`` for
reference.

Usage: ``python bench/bench_services.py [--quick]``; importable as
``run(quick=False) -> dict``.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentplug import PluginApi, PluginHost
from agentplug.services.approvals import ApprovalBroker, ProgrammaticResolver
from agentplug.services.toolcalls import ToolCallGate
from agentplug.store import MemoryStore, SQLiteStore, StateStore
from agentplug_hookspecs.tools import ApprovalRequest


def _answering() -> ProgrammaticResolver:
    resolver = ProgrammaticResolver()
    resolver.on_pending = lambda p: resolver.resolve(p.id, "allow-once")
    return resolver


def _percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median_us": round(statistics.median(ordered) * 1e6, 1),
        "p95_us": round(ordered[int(len(ordered) * 0.95) - 1] * 1e6, 1),
        "min_us": round(ordered[0] * 1e6, 1),
        "n": len(ordered),
    }


async def _approval(n: int) -> dict[str, Any]:
    broker = ApprovalBroker(_answering(), store=MemoryStore())
    request = ApprovalRequest(title="bench", description="d", plugin_id="bench")
    for _ in range(min(50, n)):
        await broker.request("web_search", {}, request)
    samples = []
    clock = time.perf_counter
    for _ in range(n):
        started = clock()
        verdict = await broker.request("web_search", {"q": "x"}, request)
        samples.append(clock() - started)
        assert verdict.allowed
    return _percentiles(samples)


async def _gate(n: int) -> dict[str, Any]:
    host = PluginHost(store=MemoryStore())

    def plugin(api: PluginApi) -> None:
        api.register_trusted_tool_policy("cap", lambda e, c: None)
        api.on(
            "before_tool_call",
            lambda event: {"require_approval": {"title": "bench", "description": "d"}},
        )

    host.register(plugin, "bench")
    gate = ToolCallGate(
        host, host.gateway.policies, ApprovalBroker(_answering(), store=host.gateway.store)
    )
    event = {"tool_name": "web_search", "params": {"q": "x"}}
    for _ in range(min(50, n)):
        await gate.check(event)
    samples = []
    clock = time.perf_counter
    for _ in range(n):
        started = clock()
        decision = await gate.check(event)
        samples.append(clock() - started)
        assert decision.allowed
    return _percentiles(samples)


def _throughput(store: StateStore, n: int) -> dict[str, float]:
    clock = time.perf_counter
    started = clock()
    for i in range(n):
        store.put("bench", f"k{i}", {"i": i, "pad": "x" * 64})
    put_s = clock() - started
    started = clock()
    for i in range(n):
        store.append("bench", "q", {"i": i})
    append_s = clock() - started
    assert len(store.drain("bench", "q")) == n
    return {
        "put_ops_per_s": round(n / put_s, 1),
        "append_ops_per_s": round(n / append_s, 1),
        "n": n,
    }


def run(quick: bool = False) -> dict[str, Any]:
    """Run both measurements; return a JSON-serialisable dict (see the module docstring).

    Keys: ``approval`` and ``gate`` (``median_us``, ``p95_us``, ``min_us``, ``n``),
    ``sqlite`` and ``memory`` (``put_ops_per_s``, ``append_ops_per_s``, ``n``).
    """
    n_rt = 200 if quick else 2_000
    n_store = 200 if quick else 2_000
    result: dict[str, Any] = {
        "approval": asyncio.run(_approval(n_rt)),
        "gate": asyncio.run(_gate(n_rt)),
    }
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "bench.sqlite3")
        try:
            result["sqlite"] = _throughput(store, n_store)
        finally:
            store.close()
    result["memory"] = _throughput(MemoryStore(), n_store)
    result["quick"] = quick
    result["python"] = sys.version.split()[0]
    return result


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv[1:]), indent=2))
