"""Cron leadership across real gateway processes sharing one store (issue 15 item 4).

Three subprocesses run a gateway's ``cluster_cron()`` on one SQLite file, and on
PostgreSQL when the ``postgres_url`` fixture finds a server. Every run of a job appends one
line to a shared log (``O_APPEND``, one ``write`` per line), which the test reads back.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from agentplug.services.cron_cluster import wall_ms
from agentplug.store import open_store_url

pytestmark = pytest.mark.stress


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'state.sqlite3'}"
    else:
        try:
            url = str(request.getfixturevalue("postgres_url"))
        except pytest.FixtureLookupError:
            pytest.skip("postgres_url fixture not available")
    open_store_url(url).close()  # schema created once, before the gateways race
    return url


# A gateway: one ClusterCron with job "beat" (every EVERY ms from START, TICKS ticks),
# a plugin that logs every cron_reconciled leader, and a stop file the test creates.
GATEWAY = """
import asyncio, os, sys, time
from agentplug import Gateway
from agentplug.store import open_store_url
url, node, log_path, stop_path = sys.argv[1:5]
start, every, ticks, lease_ms, poll_ms, catch_up, work_ms = map(int, sys.argv[5:12])
fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
def log(line):
    os.write(fd, (line + "\\n").encode())
store = open_store_url(url)
gateway = Gateway(store=store)
host = gateway.host
def plugin(api):
    api.on("cron_reconciled", lambda event, ctx: log(f"leader {node} {ctx.leader}"))
host.register(plugin, "leader-log")
async def beat(tick):
    log(f"start {node} {tick.tick}")
    if work_ms:
        await asyncio.sleep(work_ms / 1000)
    log(f"end {node} {tick.tick}")
async def main():
    cron = gateway.cluster_cron(node_id=node, lease_ms=lease_ms, poll_ms=poll_ms)
    cron.add_job("beat", every, beat, start_ms=start, end_ms=start + ticks * every,
                 catch_up_ms=catch_up)
    async def watch():
        while not os.path.exists(stop_path):
            await asyncio.sleep(0.05)
        cron.stop()
    await asyncio.gather(cron.run(), watch())
asyncio.run(main())
store.close()
"""


def _gateways(
    url: str,
    tmp_path: Path,
    start: int,
    every: int,
    ticks: int,
    *,
    lease_ms: int,
    poll_ms: int,
    catch_up: int,
    work_ms: int,
    count: int = 3,
) -> tuple[dict[str, subprocess.Popen[bytes]], Path, Path]:
    log, stop = tmp_path / "runs.log", tmp_path / "stop"
    args = [str(a) for a in (start, every, ticks, lease_ms, poll_ms, catch_up, work_ms)]
    procs = {
        f"g{i}": subprocess.Popen(
            [
                sys.executable,
                "-c",
                textwrap.dedent(GATEWAY),
                url,
                f"g{i}",
                str(log),
                str(stop),
                *args,
            ],
            stderr=subprocess.PIPE,
        )
        for i in range(count)
    }
    return procs, log, stop


def _lines(log: Path, kind: str) -> list[tuple[str, str]]:
    if not log.exists():
        return []
    out = []
    for line in log.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == kind:
            out.append((parts[1], parts[2]))
    return out


def _wait_for(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def _finish(procs: dict[str, subprocess.Popen[bytes]], stop: Path) -> None:
    stop.touch()
    for name, proc in procs.items():
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.returncode not in (0, -signal.SIGKILL):
            err = proc.stderr.read().decode() if proc.stderr else ""
            pytest.fail(f"gateway {name} exited {proc.returncode}: {err[-2000:]}")


def test_three_gateways_run_each_of_100_ticks_exactly_once(store_url: str, tmp_path: Path) -> None:
    ticks, every = 100, 40
    start = wall_ms() + 1500  # after the three have started
    procs, log, stop = _gateways(
        store_url,
        tmp_path,
        start,
        every,
        ticks,
        lease_ms=2000,
        poll_ms=100,
        catch_up=600_000,
        work_ms=0,  # a slow poll on a loaded machine runs late, not never
    )
    try:
        _wait_for(lambda: len(_lines(log, "end")) >= ticks, 120, f"{ticks} runs")
        time.sleep(3 * 0.1 + every * 3 / 1000)  # a duplicate would show up by now
    finally:
        _finish(procs, stop)
    started = Counter(tick for _, tick in _lines(log, "start"))
    assert sorted(started, key=int) == [str(t) for t in range(ticks)]
    assert [t for t, n in started.items() if n > 1] == []
    assert len({node for node, _ in _lines(log, "start")}) >= 1


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_leader_killed_mid_job_loses_the_lease_and_no_tick_runs_twice(
    store_url: str, tmp_path: Path
) -> None:
    # Ticks for ten minutes: the test stops the gateways once it saw the failover, so a
    # slow start on a loaded machine still finds ticks to run (60 ticks ran out first).
    ticks, every, lease_ms = 3000, 200, 1200
    start = wall_ms() + 1500
    procs, log, stop = _gateways(
        store_url,
        tmp_path,
        start,
        every,
        ticks,
        lease_ms=lease_ms,
        poll_ms=100,
        catch_up=every,
        work_ms=120,  # each run is in progress for 120 ms of its 200
    )
    try:
        # Kill the leader while one of its runs has started and not ended.
        def mid_job() -> bool:
            starts, ends = _lines(log, "start"), set(_lines(log, "end"))
            return len(starts) >= 3 and starts[-1] not in ends

        _wait_for(mid_job, 60, "the leader to be mid-job")
        leader, interrupted = _lines(log, "start")[-1]
        procs[leader].send_signal(signal.SIGKILL)
        procs[leader].wait(timeout=10)
        killed_at = len(_lines(log, "start"))

        def taken_over() -> bool:
            return any(node != leader for node, _ in _lines(log, "start")[killed_at:])

        _wait_for(taken_over, 30, "another gateway to take the lease over")
        new_leader = next(n for n, _ in _lines(log, "start")[killed_at:] if n != leader)
        _wait_for(lambda: len(_lines(log, "start")) >= killed_at + 5, 30, "runs after failover")
        survivors = {n for n in procs if n != leader}

        def reported() -> set[str]:
            return {node for node, seen in _lines(log, "leader") if seen == new_leader}

        _wait_for(lambda: survivors <= reported(), 10, "cron_reconciled naming the new leader")
    finally:
        _finish(procs, stop)
    starts = _lines(log, "start")
    assert [t for t, n in Counter(t for _, t in starts).items() if n > 1] == []
    assert (leader, interrupted) not in set(_lines(log, "end"))  # it died mid-run ...
    assert [n for n, t in starts if t == interrupted] == [leader]  # ... and nobody reran it
    after = starts[killed_at:]
    assert after and {n for n, _ in after} == {new_leader}  # one leader after the failover
    assert survivors <= reported()  # every surviving gateway's cron_reconciled names it
