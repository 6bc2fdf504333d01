"""Concurrent sessions on one gateway: N = 1, 100, 1 000 conversations at once.

Every session runs the turn of :mod:`workload` (a model awaiting 50 ms per call, one tool
call, two model calls) through ``gateway.runner.handle_inbound``, in three variants: no
plugins (``none``), 10 plugins with a no-op handler on every hook of the turn
(``plugins10``), and the same turn in PydanticAI (``pydantic_ai``, ``FunctionModel`` over
an ``async`` function awaiting the same 50 ms, one tool; skipped with the reason when the
extra is missing). Two shapes:

* ``saturation``: each session sends its next turn as soon as the last one ended;
* ``users``: session starts are spread over 5 s and each session pauses 5 s between turns.

A session starts a new conversation every :data:`CONVERSATION_TURNS` turns, so a turn's
cost does not grow with the length of the run. Measured over a window that opens once
every session has finished a turn (the start-up burst is not measured): turns/s (turns
that ended in the window / its length), CPU time per turn (``time.process_time`` over the
window / those turns), the added latency p50 / p99 (turn latency minus the model's own
100 ms), the event-loop lag p99 (a task sleeping 10 ms, how late it wakes), the peak RSS
of the run, and the garbage collections of each generation in the window.

Each run (shape, N, variant, repeat) is a fresh process, so the peak RSS and the
collector's state are the run's own; the variants' order rotates between repeats
(interleaved) and every figure is the median over repeats (3 for saturation, 2 for
users; ratios: the median of each repeat's ratio). ``--quick`` runs N = 1 and 20 with
short windows and pauses, one repeat, in this process: a smoke run that keeps the code
working, not a measurement.

Targets (issue 30), saturation at N = 1 000: CPU per turn (no plugins) at most 0.25x
PydanticAI's; turns/s with 10 plugins at least 0.8x the turns/s with none; CPU per turn
at N = 1 000 within 1.2x of N = 100 (both agentplug variants); users at N = 1 000: added
p99 at most 25 ms (both agentplug variants).

Usage: ``python bench/bench_concurrency.py [--quick] [--repeats R] [--n 1,100,1000]
[--shapes saturation,users]``; importable as ``run(quick=False)``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import math
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import workload  # noqa: E402

VARIANTS = ("none", "plugins10", "pydantic_ai")
SHAPES = ("saturation", "users")
CONVERSATION_TURNS = 4
TARGET_CPU_VS_PAI = 0.25
TARGET_PLUGINS_TPS = 0.8
TARGET_USERS_P99_MS = 25.0
TARGET_CPU_GROWTH = 1.2


@dataclass
class Settings:
    """How long each run lasts."""

    ns: tuple[int, ...] = (1, 100, 1000)
    shapes: tuple[str, ...] = SHAPES
    repeats: int = 3
    """Runs of each variant, saturation shape."""
    users_repeats: int = 2
    """Runs of each variant, users shape (each lasts 20 s whatever N is)."""
    window_s: float = 10.0
    """The measured window of the saturation shape."""
    users_window_s: float = 15.0
    users_spread_s: float = 5.0
    users_pause_s: float = 5.0
    settle_s: float = 0.5
    """Wait after every session finished a turn, before the window opens."""
    isolate: bool = True
    """One process per run (the full benchmark); ``False`` runs in this process."""
    gc_freeze: bool = False
    """``gc.freeze()`` after the warm-up: what start-up built is never collected again, so
    a full collection walks only what the turns hold (docs/scaling.md, "Capacity")."""
    max_warm_s: float = 180.0


QUICK = Settings(
    ns=(1, 20),
    repeats=1,
    users_repeats=1,
    window_s=0.5,
    users_window_s=1.0,
    users_spread_s=0.2,
    users_pause_s=0.2,
    settle_s=0.1,
    isolate=False,
    max_warm_s=60.0,
)


@dataclass
class _Tally:
    first_done: int = 0
    started: float = 0.0
    open: bool = False
    latencies: list[float] = field(default_factory=list)
    failures: int = 0
    error: str | None = None


async def _turn_fn(variant: str, plugins: int) -> tuple[workload.TurnFn, Any]:
    if variant == "pydantic_ai":
        return workload.pydantic_ai_turn(), None
    gateway = workload.build_gateway(plugins)
    await gateway.start()
    return workload.agentplug_turn(gateway), gateway


async def measure(shape: str, n: int, variant: str, settings: Settings) -> dict[str, Any]:
    """One run: ``n`` sessions of ``variant`` in ``shape``; the window's figures."""
    turn, gateway = await _turn_fn(variant, workload.PLUGINS if variant == "plugins10" else 0)
    for i in range(3):  # warm-up: imports, plans, caches
        await turn(f"warm-{i}")
    gc.collect()
    if settings.gc_freeze:
        gc.freeze()
    users = shape == "users"
    pause = settings.users_pause_s if users else 0.0
    window = settings.users_window_s if users else settings.window_s
    tally = _Tally()
    stop = asyncio.Event()
    all_started = asyncio.Event()
    clock = time.perf_counter

    async def rest(seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), seconds)

    async def lane(index: int) -> None:
        if users:
            await rest(settings.users_spread_s * index / max(n, 1))
        done = 0
        while not stop.is_set():
            key = f"s{index}-c{done // CONVERSATION_TURNS}"
            started = clock()
            try:
                await turn(key)
            except Exception as exc:
                tally.failures += 1
                tally.error = tally.error or f"{type(exc).__name__}: {exc}"
            ended = clock()
            if tally.open and ended >= tally.started:
                tally.latencies.append(ended - started)
            done += 1
            if done == 1:
                tally.first_done += 1
                if tally.first_done == n:
                    all_started.set()
            if pause:
                await rest(pause)

    workload.reset_peak_rss()
    rss_before = workload.rss_mib()
    lag = workload.LoopLag()
    lag.start()
    gcs = workload.GcCounter()
    load_before = workload.load_average()
    begun = clock()
    lanes = [asyncio.ensure_future(lane(i)) for i in range(n)]
    with contextlib.suppress(TimeoutError):  # measure anyway; ``warm_s`` says how long
        await asyncio.wait_for(all_started.wait(), settings.max_warm_s)
    warm_s = clock() - begun
    await asyncio.sleep(settings.settle_s)
    tally.latencies.clear()
    cpu0 = time.process_time()
    waited0 = workload.run_queue_wait_s()
    tally.started = clock()
    tally.open = lag.recording = True
    gcs.start()
    await asyncio.sleep(window)
    ended = clock()
    cpu = time.process_time() - cpu0
    waited = workload.run_queue_wait_s() - waited0
    tally.open = lag.recording = False
    gcs.stop()
    tracked = len(gc.get_objects())  # what the collector walks in a full collection
    turns = len(tally.latencies)
    stop.set()
    await asyncio.gather(*lanes)
    await lag.stop()
    peak = workload.peak_rss_mib()
    if gateway is not None:
        await gateway.stop()
    added = [(x - workload.MODEL_TOTAL_S) * 1000 for x in tally.latencies]
    length = ended - tally.started
    return {
        "shape": shape,
        "n": n,
        "variant": variant,
        "window_s": round(length, 3),
        "warm_s": round(warm_s, 2),
        "turns": turns,
        "failures": tally.failures,
        "error": tally.error,
        "turns_per_s": round(turns / length, 2),
        "cpu_ms_per_turn": round(cpu / turns * 1000, 4) if turns else math.nan,
        "added_p50_ms": round(workload.percentile(added, 50), 3),
        "added_p99_ms": round(workload.percentile(added, 99), 3),
        "lag_p99_ms": round(workload.percentile(lag.samples, 99) * 1000, 3),
        "rss_before_mib": round(rss_before, 1),
        "peak_rss_mib": round(peak, 1),
        "gc_collections": gcs.counts,
        "gc_ms": round(gcs.seconds * 1000, 1),
        "gc_ms_by_generation": [round(x * 1000, 1) for x in gcs.seconds_by_generation],
        "gc_max_ms": round(gcs.longest * 1000, 1),
        "cpu_share": round(cpu / length, 3),
        "run_queue_wait_share": round(waited / length, 3),
        "tracked_objects": tracked,
        "load": [load_before, workload.load_average()],
    }


def _run_cell(shape: str, n: int, variant: str, settings: Settings) -> dict[str, Any]:
    if not settings.isolate:
        return asyncio.run(measure(shape, n, variant, settings))
    spec = json.dumps({"shape": shape, "n": n, "variant": variant, "settings": asdict(settings)})
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--cell", spec],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{shape} n={n} {variant} failed: {proc.stderr.strip()[-800:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _pydantic_ai_missing() -> str | None:
    try:
        import pydantic_ai.models.function  # noqa: F401
    except ImportError as exc:
        return f"pydantic-ai not installed ({exc}); pip install 'agentplug[pydantic-ai]'"
    return None


_METRICS = (
    "turns_per_s",
    "cpu_ms_per_turn",
    "added_p50_ms",
    "added_p99_ms",
    "lag_p99_ms",
    "peak_rss_mib",
    "turns",
    "failures",
)


def _median(values: list[float]) -> float:
    clean = [v for v in values if not math.isnan(v)]
    return round(statistics.median(clean), 4) if clean else math.nan


def run(quick: bool = False, settings: Settings | None = None) -> dict[str, Any]:
    """Every shape x N x variant, ``repeats`` times interleaved; medians and targets."""
    s = settings or (QUICK if quick else Settings())
    missing = _pydantic_ai_missing()
    variants = [v for v in VARIANTS if not (v == "pydantic_ai" and missing)]
    samples: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {}
    for shape in s.shapes:
        for n in s.ns:
            cell = samples.setdefault(shape, {}).setdefault(str(n), {v: [] for v in variants})
            for repeat in range(s.repeats if shape == "saturation" else s.users_repeats):
                order = variants[repeat % len(variants) :] + variants[: repeat % len(variants)]
                for variant in order:
                    print(f"  {shape} n={n} {variant} #{repeat + 1}", file=sys.stderr)
                    cell[variant].append(_run_cell(shape, n, variant, s))
    cells: dict[str, Any] = {}
    for shape, by_n in samples.items():
        for n_key, by_variant in by_n.items():
            for variant, runs in by_variant.items():
                row = {m: _median([float(r[m]) for r in runs]) for m in _METRICS}
                row["gc_gen2"] = _median([float(r["gc_collections"][2]) for r in runs])
                row["load"] = [r["load"] for r in runs]
                cells.setdefault(shape, {}).setdefault(n_key, {})[variant] = row
    result: dict[str, Any] = {
        "quick": quick,
        "settings": asdict(s),
        "pydantic_ai": missing or "measured",
        "cells": cells,
        "samples": samples,
    }
    result["targets"] = _targets(samples, s, missing)
    return result


def _paired(
    samples: dict[str, Any], shape: str, n: int, a: str, b: str, metric: str
) -> float | None:
    """Median over repeats of ``a``'s metric / ``b``'s, repeat by repeat."""
    cell = samples.get(shape, {}).get(str(n), {})
    if a not in cell or b not in cell:
        return None
    ratios = [
        ra[metric] / rb[metric]
        for ra, rb in zip(cell[a], cell[b], strict=True)
        if rb[metric] and not math.isnan(ra[metric]) and not math.isnan(rb[metric])
    ]
    return round(statistics.median(ratios), 3) if ratios else None


def _targets(samples: dict[str, Any], s: Settings, missing: str | None) -> list[dict[str, Any]]:
    big = max(s.ns)
    mid = max((n for n in s.ns if n < big), default=big)
    out: list[dict[str, Any]] = []

    def add(name: str, value: float | None, limit: float, at_most: bool, note: str = "") -> None:
        met = None if value is None else (value <= limit if at_most else value >= limit)
        out.append(
            {
                "name": name,
                "value": value,
                "limit": limit,
                "at_most": at_most,
                "met": met,
                "note": note,
            }
        )

    if "saturation" in s.shapes:
        add(
            f"saturation N={big}: CPU per turn, no plugins vs PydanticAI",
            _paired(samples, "saturation", big, "none", "pydantic_ai", "cpu_ms_per_turn"),
            TARGET_CPU_VS_PAI,
            True,
            missing or "",
        )
        add(
            f"saturation N={big}: turns/s, 10 plugins vs none",
            _paired(samples, "saturation", big, "plugins10", "none", "turns_per_s"),
            TARGET_PLUGINS_TPS,
            False,
        )
        growth = [
            _paired_across(samples, "saturation", big, mid, variant, "cpu_ms_per_turn")
            for variant in ("none", "plugins10")
        ]
        worst = max((g for g in growth if g is not None), default=None)
        add(
            f"saturation: CPU per turn N={big} vs N={mid} (worse of none / plugins10)",
            worst,
            TARGET_CPU_GROWTH,
            True,
            f"none {growth[0]}, plugins10 {growth[1]}",
        )
    if "users" in s.shapes:
        cell = samples.get("users", {}).get(str(big), {})
        p99s = {
            v: _median([r["added_p99_ms"] for r in cell[v]])
            for v in ("none", "plugins10")
            if v in cell
        }
        add(
            f"users N={big}: added p99 ms (worse of none / plugins10)",
            max(p99s.values()) if p99s else None,
            TARGET_USERS_P99_MS,
            True,
            ", ".join(f"{k} {v}" for k, v in p99s.items()),
        )
    return out


def _paired_across(
    samples: dict[str, Any], shape: str, big: int, small: int, variant: str, metric: str
) -> float | None:
    """Median of the big N's metric over the median of the small N's (different runs)."""
    by_n = samples.get(shape, {})
    if str(big) not in by_n or str(small) not in by_n:
        return None
    a = _median([r[metric] for r in by_n[str(big)].get(variant, [])])
    b = _median([r[metric] for r in by_n[str(small)].get(variant, [])])
    if math.isnan(a) or math.isnan(b) or not b:
        return None
    return round(a / b, 3)


def target_line(t: dict[str, Any]) -> str:
    """``value vs limit MET/MISSED`` for the summary table."""
    sign = "<=" if t["at_most"] else ">="
    verdict = {True: "MET", False: "MISSED", None: "n/a"}[t["met"]]
    return f"{sign} {t['limit']:g} {verdict}"


def format_table(result: dict[str, Any]) -> str:
    """One row per shape, N and variant; then the targets."""
    head = (
        f"{'shape':<10} {'N':>5} {'variant':<12} {'turns/s':>8} {'cpu ms/turn':>11} "
        f"{'+p50 ms':>8} {'+p99 ms':>8} {'lag p99':>8} {'peak MiB':>8} {'gen2':>5} {'fail':>4}"
    )
    lines = [
        "concurrent sessions (model 2 x 50 ms, 1 tool call; medians of "
        f"{result['settings']['repeats']} runs (users: {result['settings']['users_repeats']}); "
        f"pydantic-ai: {result['pydantic_ai']})",
        head,
        "-" * len(head),
    ]
    for shape, by_n in result["cells"].items():
        for n_key, by_variant in by_n.items():
            for variant, row in by_variant.items():
                lines.append(
                    f"{shape:<10} {n_key:>5} {variant:<12} {row['turns_per_s']:>8.1f} "
                    f"{row['cpu_ms_per_turn']:>11.3f} {row['added_p50_ms']:>8.1f} "
                    f"{row['added_p99_ms']:>8.1f} {row['lag_p99_ms']:>8.1f} "
                    f"{row['peak_rss_mib']:>8.1f} {row['gc_gen2']:>5.0f} {row['failures']:>4.0f}"
                )
    lines.append("targets:")
    for t in result["targets"]:
        value = "-" if t["value"] is None else f"{t['value']:.3f}"
        note = f"  ({t['note']})" if t["note"] else ""
        lines.append(f"  {t['name']}: {value}  {target_line(t)}{note}")
    return "\n".join(lines)


def _main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--cell", help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--n", help="comma-separated session counts")
    parser.add_argument("--shapes", help="comma-separated: saturation,users")
    parser.add_argument("--json", action="store_true", help="print the result as JSON too")
    parser.add_argument("--gc-freeze", action="store_true", help="gc.freeze() after warm-up")
    args = parser.parse_args(argv)
    if args.cell:
        spec = json.loads(args.cell)
        settings = Settings(**{**spec["settings"], "ns": tuple(spec["settings"]["ns"])})
        print(json.dumps(asyncio.run(measure(spec["shape"], spec["n"], spec["variant"], settings))))
        return
    settings = replace(QUICK if args.quick else Settings())
    if args.repeats:
        settings.repeats = settings.users_repeats = args.repeats
    if args.n:
        settings.ns = tuple(int(x) for x in args.n.split(","))
    if args.shapes:
        settings.shapes = tuple(args.shapes.split(","))
    settings.gc_freeze = args.gc_freeze
    result = run(args.quick, settings)
    print(format_table(result))
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    _main(sys.argv[1:])
