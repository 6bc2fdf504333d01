"""What dict input costs: ``host.hooks.before_tool_call(dict, dict)`` against pre-built models.

The README's path hands the typed facade plain dicts, which the runtime validates into the
hook's frozen event and context models on every call. A host that builds its models once
skips that. Both variants run the same host (1, 10 and 100 ``async def`` no-op handlers)
interleaved in one ``asyncio.run``; the ratio ``dict / model`` is what validation costs.

A third variant, ``validate``, times only ``ToolCallEvent.model_validate(dict)`` plus the
context, to show how much of the dict path is pydantic itself.

Target (issue 14): ``dict / model`` <= 2.0 at 1 handler.

Usage: ``python bench/bench_input.py [--quick]``; importable as ``run(quick=False)``.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
from typing import Any

from bench_dispatch import (
    COUNTS,
    Timer,
    agentplug_host,
    interleaved,
    noop_handler,
    paired_ratio,
    timer_async,
)

TARGET_AT_1 = 2.0
EVENT = {
    "tool_name": "exec",
    "params": {"command": "ls -la", "cwd": "/tmp", "timeout": 30, "env": {"LANG": "C"}},
    "run_id": "r1",
    "tool_call_id": "c1",
}
CTX = {"agent_id": "bench", "session_key": "s1", "run_id": "r1"}


async def _variants(count: int) -> dict[str, Timer]:
    host = agentplug_host(
        [noop_handler("before_tool_call", i, is_async=True) for i in range(count)]
    )
    decl = host.declarations["before_tool_call"]
    event_model, ctx_model = decl.event.model_validate(EVENT), decl.ctx.model_validate(CTX)
    facade = host.hooks.before_tool_call
    first = await facade(EVENT, CTX)
    assert [r[1].value for r in first.records] == ["ok"] * count
    assert first.outcome.params == EVENT["params"]

    async def with_dicts() -> Any:
        return (await facade(EVENT, CTX)).outcome

    async def with_models() -> Any:
        return (await facade(event_model, ctx_model)).outcome

    async def validate_only() -> Any:
        return decl.event.model_validate(EVENT), decl.ctx.model_validate(CTX)

    return {
        "dict": timer_async(with_dicts),
        "model": timer_async(with_models),
        "validate": timer_async(validate_only),
    }


async def _rows(quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for count in COUNTS:
        variants = await _variants(count)
        n = {1: 2000, 10: 1000, 100: 150}[count]
        repeats = 5 if quick else 15
        if quick:
            n //= 4
        samples = await interleaved(variants, n, repeats, warmup=max(n // 2, 50))
        row: dict[str, Any] = {"handlers": count, "repeats": repeats}
        for name, values in samples.items():
            row[f"{name}_us"] = statistics.median(values) * 1e6
        row["dict_vs_model"] = paired_ratio(samples["dict"], samples["model"])
        out[str(count)] = row
    return out


def run(quick: bool = False) -> dict[str, Any]:
    """Rows per handler count (``dict_us``, ``model_us``, ``validate_us``, ``dict_vs_model``)
    and the target at 1 handler."""
    rows = asyncio.run(_rows(quick))
    value = rows["1"]["dict_vs_model"]
    return {
        "rows": rows,
        "target": {"max_at_1": TARGET_AT_1, "value": value, "met": value <= TARGET_AT_1},
        "quick": quick,
    }


def format_table(result: dict[str, Any]) -> str:
    """The human-readable table of a :func:`run` result."""
    lines = [
        "host.hooks.before_tool_call(dict, dict) vs pre-built models (median µs per dispatch)",
        f"{'handlers':>8} {'dict':>9} {'model':>9} {'validate':>9} {'dict/model':>11}",
    ]
    for row in result["rows"].values():
        lines.append(
            f"{row['handlers']:>8} {row['dict_us']:>9.2f} {row['model_us']:>9.2f}"
            f" {row['validate_us']:>9.2f} {row['dict_vs_model']:>10.2f}x"
        )
    t = result["target"]
    lines.append(
        f"  target dict/model at 1 <= {t['max_at_1']:.1f}: {t['value']:.2f}x "
        f"{'MET' if t['met'] else 'MISSED'}"
    )
    return "\n".join(lines)


if __name__ == "__main__":
    print(format_table(run(quick="--quick" in sys.argv[1:])))
