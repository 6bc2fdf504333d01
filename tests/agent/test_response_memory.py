"""Memory, not time: a turn receiving a 50 MB model response stays under 3x the limit.

The turn runs in a fresh subprocess against the real chat server of this process. The
child runs a small warm-up turn, reads its peak RSS (``resource.getrusage`` maxrss: the
process baseline), runs the 50 MB turn and reads the peak again; the growth must stay
under 3x ``agent.limits.model_response_bytes``. Linux carries a peak RSS across ``exec``
(and this process holds the 50 MB body), so the child is started by a small launcher that
forks and execs it: its peak then starts at the launcher's size, below its own baseline.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from tests.agent.chat_server import ChatServer, Unsized, chat_server

MIB = 1024 * 1024

LAUNCHER = """
import os, sys
pid = os.fork()
if pid == 0:
    os.execv(sys.executable, [sys.executable, "-c", sys.argv[1], *sys.argv[2:]])
_, status = os.waitpid(pid, 0)
sys.exit(os.waitstatus_to_exitcode(status))
"""

CHILD = """
import asyncio, json, resource, sys
from agentplug import PluginHost
from agentplug.agent import AgentRunner

base_url, limit = sys.argv[1], int(sys.argv[2])

def turn(prompt):
    config = {
        "model": "openai/m",
        "tools": {"actions": False},
        "providers": {"openai": {"base_url": base_url, "timeout_s": 120}},
    }
    if limit:  # 0: the default limits
        config["limits"] = {"model_response_bytes": limit}
    runner = AgentRunner(PluginHost(), config=config)
    return asyncio.run(runner.run_turn(prompt, session_key=prompt))

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux

warm = turn("warm")
baseline = peak()
result = turn("big")
print(json.dumps({
    "warm": warm.status,
    "baseline": baseline,
    "growth": peak() - baseline,
    "status": result.status,
    "reply": len(result.reply or ""),
    "error": result.error,
}))
"""

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="maxrss in KiB and fork: Linux only"
)


def _measure(server: ChatServer, limit: int) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCHER, CHILD, server.base_url, str(limit)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def _big_body(server: ChatServer) -> bytes:
    return server.completion({"content": "x" * 50_000_000})


def test_a_50_mb_response_over_the_default_limit_costs_under_three_times_the_limit() -> None:
    with chat_server() as server:
        server.reply("warm")
        server.raw(200, Unsized(_big_body(server)))  # no length: read until the limit
        measured = _measure(server, 0)
    assert measured["warm"] == "replied"
    assert measured["growth"] < 3 * 16 * MIB, measured  # 16 MiB: the default limit
    assert measured["status"] == "failed"
    assert "agent.limits.model_response_bytes" in measured["error"]


def test_a_50_mb_response_under_a_raised_limit_costs_under_three_times_the_limit() -> None:
    with chat_server() as server:
        server.reply("warm")
        server.raw(200, _big_body(server))
        measured = _measure(server, 64 * MIB)
    assert measured["status"] == "replied" and measured["reply"] < MIB + 200
    assert measured["growth"] < 3 * 64 * MIB, measured
