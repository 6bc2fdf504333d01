"""The control API's turn endpoint under 200 concurrent clients, against the runner itself.

``POST /api/sessions/{key}/messages`` runs one turn through the gateway's runner. A
server process builds the gateway of :mod:`workload` (the model awaits 50 ms per call,
one tool call, no plugins, memory store) and serves it with :func:`agentplug.api.app.
create_app` on uvicorn as ``agentplug serve`` does (127.0.0.1, access log off). 200
clients (one ``httpx.AsyncClient`` each, one connection, a 60 s timeout; every answer is
read, its status and ``status`` checked), each on its own session, post their next turn as
soon as the last one answered, starting a new conversation every
:data:`bench_concurrency.CONVERSATION_TURNS` turns as the baseline's sessions do (a
turn's cost grows with its transcript). Over a window that opens once every client got an
answer: turns/s, latency p50 / p99 as the clients see it (minus the model's own 100 ms),
and the server process's CPU time per turn (``/proc/<pid>/stat``, user + system).

The baseline, in the same run: the same 200 sessions calling
``gateway.runner.handle_inbound`` directly in a process of their own
(:func:`bench_concurrency.measure`, saturation shape). The two alternate (``repeats``
each, interleaved); medians. Target (issue 30): the API's CPU per turn at most 1.5x the
in-process runner's.

Usage: ``python bench/bench_turn_api.py [--quick] [--clients N]``; importable as
``run(quick=False)``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import bench_concurrency  # noqa: E402
import workload  # noqa: E402

TARGET_RATIO = 1.5
CLIENTS = 200


def _serve(token: str) -> None:
    """The server process: print the port, serve until killed."""
    import uvicorn
    from agentplug.api.app import create_app
    from agentplug.api.serve import bind_loopback

    async def main() -> None:
        gateway = workload.build_gateway(0)
        await gateway.start()
        app = create_app(gateway, token=token)
        sock = bind_loopback("127.0.0.1", 0)
        config = uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False)
        server = uvicorn.Server(config)
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started and not serving.done():
            await asyncio.sleep(0.02)
        print(f"PORT {sock.getsockname()[1]}", flush=True)
        await serving

    asyncio.run(main())


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of process ``pid``."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _drive(port: int, token: str, pid: int, clients: int, window_s: float) -> dict[str, Any]:
    import httpx

    stop = asyncio.Event()
    first = asyncio.Event()
    answered: set[int] = set()
    latencies: list[float] = []
    failures: list[str] = []
    state = {"open": False, "since": 0.0}
    clock = time.perf_counter

    async def client(index: int) -> None:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}",
            headers={"Authorization": f"Bearer {token}"},
            timeout=httpx.Timeout(60.0),
            limits=httpx.Limits(max_connections=1),
        ) as http:
            done = 0
            while not stop.is_set():
                session = f"api-{index}-c{done // bench_concurrency.CONVERSATION_TURNS}"
                done += 1
                started = clock()
                try:
                    answer = await http.post(
                        f"/api/sessions/{session}/messages", json={"content": "hi"}
                    )
                    ok = answer.status_code == 200 and answer.json().get("status") == "replied"
                    if not ok:
                        failures.append(f"{answer.status_code} {answer.text[:200]}")
                except httpx.HTTPError as exc:
                    failures.append(f"{type(exc).__name__}: {exc}")
                    ok = False
                ended = clock()
                if ok and state["open"] and ended >= state["since"]:
                    latencies.append(ended - started)
                answered.add(index)
                if len(answered) == clients:
                    first.set()

    tasks = [asyncio.ensure_future(client(i)) for i in range(clients)]
    await asyncio.wait_for(first.wait(), 300)
    await asyncio.sleep(0.5)
    latencies.clear()
    cpu0 = _cpu_s(pid)
    state.update(open=True, since=clock())
    await asyncio.sleep(window_s)
    length = clock() - state["since"]
    cpu = _cpu_s(pid) - cpu0
    state["open"] = False
    turns = len(latencies)
    stop.set()
    await asyncio.gather(*tasks)
    added = [(x - workload.MODEL_TOTAL_S) * 1000 for x in latencies]
    return {
        "turns": turns,
        "window_s": round(length, 3),
        "turns_per_s": round(turns / length, 2),
        "server_cpu_ms_per_turn": round(cpu / turns * 1000, 4) if turns else float("nan"),
        "added_p50_ms": round(workload.percentile(added, 50), 2),
        "added_p99_ms": round(workload.percentile(added, 99), 2),
        "failures": len(failures),
        "first_failure": failures[0] if failures else None,
        "load": workload.load_average(),
    }


def _api_run(clients: int, window_s: float) -> dict[str, Any]:
    token = secrets.token_urlsafe(24)
    server = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve", token],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the API server did not start: {server.stderr.read()[-800:]}")  # type: ignore[union-attr]
        return asyncio.run(_drive(int(line.split()[1]), token, server.pid, clients, window_s))
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _runner_run(clients: int, window_s: float) -> dict[str, Any]:
    settings = replace(bench_concurrency.Settings(), window_s=window_s)
    spec = json.dumps({"clients": clients, "window_s": settings.window_s})
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--runner", spec],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"the in-process run failed: {proc.stderr.strip()[-800:]}")
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _runner_child(spec: dict[str, Any]) -> dict[str, Any]:
    settings = replace(bench_concurrency.Settings(), window_s=spec["window_s"], isolate=False)
    return asyncio.run(bench_concurrency.measure("saturation", spec["clients"], "none", settings))


def run(quick: bool = False, clients: int | None = None) -> dict[str, Any]:
    """API and in-process runner, alternating; medians and the target."""
    count = clients or (20 if quick else CLIENTS)
    repeats, window = (1, 1.5) if quick else (3, 10.0)
    api: list[dict[str, Any]] = []
    runner: list[dict[str, Any]] = []
    for repeat in range(repeats):
        order = [("api", api), ("runner", runner)]
        for name, bucket in order if repeat % 2 == 0 else order[::-1]:
            print(f"  turn api: {name} #{repeat + 1}", file=sys.stderr)
            bucket.append(_api_run(count, window) if name == "api" else _runner_run(count, window))
    ratios = [
        a["server_cpu_ms_per_turn"] / r["cpu_ms_per_turn"]
        for a, r in zip(api, runner, strict=True)
        if r["cpu_ms_per_turn"]
    ]
    ratio = round(statistics.median(ratios), 3) if ratios else None

    def med(rows: list[dict[str, Any]], key: str) -> float:
        return round(statistics.median(float(r[key]) for r in rows), 4)

    return {
        "clients": count,
        "repeats": repeats,
        "api": {
            k: med(api, k)
            for k in ("turns_per_s", "server_cpu_ms_per_turn", "added_p50_ms", "added_p99_ms")
        }
        | {"failures": sum(r["failures"] for r in api)},
        "runner": {
            k: med(runner, k)
            for k in ("turns_per_s", "cpu_ms_per_turn", "added_p50_ms", "added_p99_ms")
        }
        | {"failures": sum(r["failures"] for r in runner)},
        "cpu_ratio": ratio,
        "target_ratio": TARGET_RATIO,
        "meets_target": ratio is not None and ratio <= TARGET_RATIO,
        "samples": {"api": api, "runner": runner},
    }


def format_table(result: dict[str, Any]) -> str:
    """API vs in-process runner."""
    a, r = result["api"], result["runner"]
    verdict = "MET" if result["meets_target"] else "MISSED"
    return "\n".join(
        [
            f"turn endpoint, {result['clients']} concurrent clients (medians of "
            f"{result['repeats']}):",
            f"  {'':<22} {'turns/s':>8} {'cpu ms/turn':>11} {'+p50 ms':>8} {'+p99 ms':>8} "
            f"{'failures':>8}",
            f"  {'POST .../messages':<22} {a['turns_per_s']:>8.1f} "
            f"{a['server_cpu_ms_per_turn']:>11.3f} {a['added_p50_ms']:>8.1f} "
            f"{a['added_p99_ms']:>8.1f} {a['failures']:>8}",
            f"  {'runner, in process':<22} {r['turns_per_s']:>8.1f} {r['cpu_ms_per_turn']:>11.3f} "
            f"{r['added_p50_ms']:>8.1f} {r['added_p99_ms']:>8.1f} {r['failures']:>8}",
            f"  server CPU per turn, API vs runner: {result['cpu_ratio']}x  target <= "
            f"{result['target_ratio']:g}x {verdict}",
        ]
    )


def _main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--serve":
        _serve(sys.argv[2])
        return
    if len(sys.argv) > 2 and sys.argv[1] == "--runner":
        print(json.dumps(_runner_child(json.loads(sys.argv[2]))))
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--clients", type=int)
    args = parser.parse_args()
    result = run(args.quick, args.clients)
    print(format_table(result))
    print(json.dumps(result))


if __name__ == "__main__":
    _main()
