"""State stores side by side: SQLite and PostgreSQL, 1 and 8 concurrent writer processes.

Four operations, each through the API a gateway calls (not raw store calls):

* ``grant_check``: ``ApprovalBroker.request`` for a scope that has a standing
  ``allow-always`` grant: one grant lookup in the store, answered from it;
* ``grant_save``: ``ApprovalBroker.request`` for a new scope, answered ``allow-always`` by
  an instantaneous ``ProgrammaticResolver``: the lookup (a miss), the in-process
  round-trip and the write of the new grant;
* ``enqueue``: ``host.gateway.sessions.enqueue_injection`` into an empty session queue (one
  ``atomic`` block: idempotency/limit checks and the append);
* ``drain``: ``host.gateway.sessions.drain_injections`` of a session holding one entry, i.e.
  ``claim_injections`` + ``ack_injections`` (two ``atomic`` blocks).

Each writer is its own process with its own ``PluginHost(store=open_store_url(url))``, as
several gateways sharing one store would be. For every backend and writer count, ``n``
operations of each kind are split among the writers; the writers do a short untimed
warm-up, then run the four phases in lock-step (a barrier before each phase), every
writer on its own grant scopes and session keys. Per phase: latency p50/p99 over every
operation of every writer, and throughput = operations / wall time of the phase (first
writer's start to last writer's end).

Backends: SQLite in a file of a temp dir (WAL, ``synchronous=FULL``); PostgreSQL on a
throwaway server this benchmark starts itself (``bench/pg_server.py``; default
durability, ``fsync=on``), a fresh database per writer count. Without server binaries or
psycopg the PostgreSQL column is reported as skipped, with the reason.

Usage: ``python bench/bench_store.py [--quick] [--n N] [--json]``; importable as
``run(n=...) -> dict`` (and ``format_table(result) -> str``).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing as mp
import os
import queue
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import pg_server  # noqa: E402
from agentplug import PluginHost  # noqa: E402
from agentplug.services.approvals import ApprovalBroker, ProgrammaticResolver  # noqa: E402
from agentplug.store import open_store_url  # noqa: E402
from agentplug_hookspecs.tools import ApprovalRequest  # noqa: E402

OPERATIONS = ("grant_check", "grant_save", "enqueue", "drain")
PHASES = ("grant_save", "grant_check", "enqueue", "drain")  # the order they run in
WRITERS = (1, 8)
BACKENDS = ("sqlite", "postgres")
DEFAULT_N = 960
QUICK_N = 40
WARMUP = 5  # untimed operations of each kind per writer
BARRIER_TIMEOUT_S = 120.0
CONFIG_TIMEOUT_S = 300.0
TOOL = "web_search"
PLUGIN = "bench"


# -- one writer process ------------------------------------------------------------------


def _writer(url: str, writer: int, count: int, barrier: Any, results: Any) -> None:
    """Process entry point: run the phases, put ``(writer, payload | None, error)``."""
    try:
        payload = asyncio.run(_phases(url, writer, count, barrier))
    except BaseException:
        barrier.abort()  # the other writers stop waiting for this one
        results.put((writer, None, traceback.format_exc()))
    else:
        results.put((writer, payload, None))


async def _phases(url: str, writer: int, count: int, barrier: Any) -> dict[str, Any]:
    store = open_store_url(url)
    try:
        host = PluginHost(store=store)
        sessions = host.gateway.sessions
        resolver = ProgrammaticResolver()
        resolver.on_pending = lambda p: resolver.resolve(p.id, "allow-always")
        broker = ApprovalBroker(resolver, store=store)
        params = {"q": "bench"}
        text = "Reminder from the bench plugin: " + "x" * 96

        def scope(tag: str, i: int) -> ApprovalRequest:
            return ApprovalRequest(
                title=f"bench {tag} w{writer} #{i}", description="d", plugin_id=PLUGIN
            )

        def session(tag: str, i: int) -> str:
            return f"agent:bench:{tag}:w{writer}:s{i}"

        async def save(request: ApprovalRequest) -> None:
            verdict = await broker.request(TOOL, params, request)
            if verdict.from_grant or verdict.grant_id is None:
                raise RuntimeError(f"grant not saved: {verdict}")

        async def check(request: ApprovalRequest) -> None:
            verdict = await broker.request(TOOL, params, request)
            if not verdict.from_grant:
                raise RuntimeError(f"standing grant not found: {verdict}")

        def enqueue(key: str) -> None:
            if not sessions.enqueue_injection(PLUGIN, key, text).accepted:
                raise RuntimeError(f"injection into {key} not accepted")

        def drain(key: str) -> None:
            if len(sessions.drain_injections(key)) != 1:
                raise RuntimeError(f"drain of {key} did not return one entry")

        # Untimed warm-up: connections, statement caches, the first transactions.
        warm = [scope("warm", i) for i in range(WARMUP)]
        for request in warm:
            await save(request)
            await check(request)
        for i in range(WARMUP):
            enqueue(session("warm", i))
            drain(session("warm", i))

        requests = [scope("run", i) for i in range(count)]
        keys = [session("run", i) for i in range(count)]
        clock = time.perf_counter  # CLOCK_MONOTONIC: comparable across processes
        out: dict[str, Any] = {}
        for phase in PHASES:
            samples: list[float] = []
            barrier.wait(BARRIER_TIMEOUT_S)
            started = clock()
            for i in range(count):
                t0 = clock()
                if phase == "grant_save":
                    await save(requests[i])
                elif phase == "grant_check":
                    await check(requests[i])
                elif phase == "enqueue":
                    enqueue(keys[i])
                else:
                    drain(keys[i])
                samples.append(clock() - t0)
            out[phase] = {"start": started, "end": clock(), "latency_s": samples}
        return out
    finally:
        store.close()


# -- one configuration: a backend URL and a writer count ----------------------------------


def _context() -> Any:
    # fork: cheap, and the parent holds no open store when it forks. Elsewhere: spawn.
    method = "fork" if "fork" in mp.get_all_start_methods() else "spawn"
    return mp.get_context(method)


def _measure(url: str, writers: int, n: int) -> dict[str, dict[str, float]]:
    open_store_url(url).close()  # create the schema once, before the writers race
    count = max(1, n // writers)
    ctx = _context()
    barrier = ctx.Barrier(writers)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_writer, args=(url, w, count, barrier, results), daemon=True)
        for w in range(writers)
    ]
    payloads: list[dict[str, Any]] = []
    errors: list[str] = []
    try:
        for proc in procs:
            proc.start()
        deadline = time.monotonic() + CONFIG_TIMEOUT_S
        for _ in procs:
            try:
                _, payload, error = results.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                errors.append(f"timed out after {CONFIG_TIMEOUT_S:.0f} s")
                break
            if error is not None:
                errors.append(error)
            else:
                payloads.append(payload)
        for proc in procs:
            proc.join(timeout=10)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
        results.close()
    if errors:
        # The first real failure, not the BrokenBarrierError it caused in the others.
        errors.sort(key=lambda e: "BrokenBarrierError" in e)
        last = errors[0].strip().splitlines()[-1]
        raise RuntimeError(f"{writers} writer(s) on {url.split(':')[0]}: {last}\n{errors[0]}")

    stats: dict[str, dict[str, float]] = {}
    for phase in PHASES:
        samples = [s for p in payloads for s in p[phase]["latency_s"]]
        wall = max(p[phase]["end"] for p in payloads) - min(p[phase]["start"] for p in payloads)
        ordered = sorted(samples)
        stats[phase] = {
            "p50_ms": round(statistics.median(ordered) * 1e3, 3),
            "p99_ms": round(ordered[max(0, math.ceil(0.99 * len(ordered)) - 1)] * 1e3, 3),
            "ops_per_s": round(len(ordered) / wall, 1),
            "ops": len(ordered),
            "seconds": round(wall, 3),
        }
    return stats


def _by_operation(per_writers: dict[int, dict[str, dict[str, float]]]) -> dict[str, Any]:
    return {op: {str(w): per_writers[w][op] for w in per_writers} for op in OPERATIONS}


def _sqlite(n: int) -> dict[str, Any]:
    import sqlite3

    per_writers: dict[int, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="agentplug-bench-sqlite-") as tmp:
        for writers in WRITERS:
            url = f"sqlite:///{Path(tmp).resolve() / f'state-w{writers}.sqlite3'}"
            per_writers[writers] = _measure(url, writers, n)
    return {
        "status": "ok",
        "info": {
            "sqlite_version": sqlite3.sqlite_version,
            "journal_mode": "wal",
            "synchronous": "FULL",
            "temp_dir": tempfile.gettempdir(),
        },
        "results": _by_operation(per_writers),
    }


def _postgres(n: int) -> dict[str, Any]:
    reason = pg_server.unavailable()
    if reason is not None:
        return {"status": "skipped", "reason": reason}
    per_writers: dict[int, dict[str, dict[str, float]]] = {}
    try:
        with pg_server.TempPostgres() as pg:
            info = pg.server_info()
            for writers in WRITERS:
                url = pg.create_database(f"bench_store_w{writers}")
                per_writers[writers] = _measure(url, writers, n)
    except Exception as exc:
        return {"status": "error", "reason": str(exc).splitlines()[0][:300], "error": str(exc)}
    return {"status": "ok", "info": info, "results": _by_operation(per_writers)}


def run(n: int = DEFAULT_N) -> dict[str, Any]:
    """Measure both backends; return a JSON-serialisable dict and print the table.

    ``n`` is the number of operations of each kind per backend and writer count, split
    evenly among the writers. Keys: ``sqlite`` and ``postgres`` (``status`` ``ok`` with
    ``info`` and ``results[operation][writers]`` = ``p50_ms``, ``p99_ms``, ``ops_per_s``,
    ``ops``, ``seconds``; or ``skipped`` / ``error`` with ``reason``), ``n``, ``writers``,
    ``operations``, ``start_method``, ``cpus``, ``seconds``.
    """
    started = time.perf_counter()
    result: dict[str, Any] = {
        "n": n,
        "writers": list(WRITERS),
        "operations": list(OPERATIONS),
        "start_method": _context().get_start_method(),
        "cpus": os.cpu_count(),
        "sqlite": _sqlite(n),
        "postgres": _postgres(n),
    }
    result["seconds"] = round(time.perf_counter() - started, 2)
    print(format_table(result))
    return result


# -- output ------------------------------------------------------------------------------


def format_table(result: dict[str, Any]) -> str:
    """The side-by-side table: rows operation x writers, columns per backend."""
    header = ["operation", "writers"]
    for backend in BACKENDS:
        header += [f"{backend} p50 ms", f"{backend} p99 ms", f"{backend} ops/s"]
    rows: list[list[str]] = []
    for op in OPERATIONS:
        for writers in result["writers"]:
            row = [op, str(writers)]
            for backend in BACKENDS:
                entry = result[backend]
                if entry.get("status") != "ok":
                    row += ["-", "-", "-"]
                    continue
                s = entry["results"][op][str(writers)]
                row += [f"{s['p50_ms']:.2f}", f"{s['p99_ms']:.2f}", f"{s['ops_per_s']:.0f}"]
            rows.append(row)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.ljust(w) if i < 2 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [
        f"[bench_store] state stores, n={result['n']} operations of each kind per cell "
        f"(split among the writers; {result['start_method']} processes, "
        f"{result['cpus']} CPUs)",
        line(header),
        "  ".join("-" * w for w in widths),
        *(line(r) for r in rows),
    ]
    for backend in BACKENDS:
        entry = result[backend]
        if entry.get("status") != "ok":
            out.append(f"{backend}: {entry.get('status')}: {entry.get('reason')}")
        else:
            info = ", ".join(f"{k}={v}" for k, v in entry["info"].items())
            out.append(f"{backend}: {info}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help=f"n={QUICK_N} (smoke run)")
    parser.add_argument("--n", type=int, default=None, help=f"operations per cell ({DEFAULT_N})")
    parser.add_argument("--json", action="store_true", help="also print the result as JSON")
    args = parser.parse_args(argv)
    n = args.n if args.n is not None else (QUICK_N if args.quick else DEFAULT_N)
    result = run(n=n)
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
