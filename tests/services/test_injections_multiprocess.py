"""Next-turn injections across processes sharing one store: once per key, none lost.

Real subprocesses on one SQLite file (and on PostgreSQL when the ``postgres_url``
fixture exists). Issue 13 item 13, issue 18 item 9, issue 15 item 2.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest
from agentplug import PluginHost
from agentplug.store import StateStore, open_store_url

pytestmark = pytest.mark.stress

SESSIONS = 50  # 1000 keys over 50 sessions: 20 per session, under the per-plugin limit
KEYS = 1000
ROUNDS = 20
PLUGIN = "wf"


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'state.sqlite3'}"
    try:
        return str(request.getfixturevalue("postgres_url"))
    except pytest.FixtureLookupError:
        pytest.skip("postgres_url fixture not available")


def _session(i: int) -> str:
    return f"agent:main:s{i % SESSIONS}"


def _host(url: str) -> tuple[PluginHost, StateStore]:
    store = open_store_url(url)
    return PluginHost(store=store), store


def _drain_all(url: str) -> list[str]:
    host, store = _host(url)
    try:
        return [
            e["idempotency_key"]
            for s in range(SESSIONS)
            for e in host.gateway.sessions.drain_injections(_session(s))
        ]
    finally:
        store.close()


# Each worker runs every round when the parent says "go <round> <url>": it enqueues the
# 1000 shared keys in its own random order, draining a random session every 10 enqueues
# (claim, then "build the prompt", then ack), and reports what its turns delivered.
WORKER = """
import json, random, sys
from agentplug import PluginHost
from agentplug.store import open_store_url
SESSIONS, KEYS = int(sys.argv[1]), int(sys.argv[2])
for line in sys.stdin:
    _, rnd, url = line.split()
    store = open_store_url(url)
    host = PluginHost(store=store)
    rng = random.Random(hash((rnd, id(store))))
    order = list(range(KEYS))
    rng.shuffle(order)
    got = []
    def turn(s):
        claim = host.gateway.sessions.claim_injections(f"agent:main:s{s}")
        got.extend(e["idempotency_key"] for e in claim.entries)
        host.gateway.sessions.ack_injections(claim)
    for n, i in enumerate(order):
        host.gateway.sessions.enqueue_injection(
            "wf", f"agent:main:s{i % SESSIONS}", f"text {i}", idempotency_key=f"k{i}"
        )
        if n % 10 == 9:
            turn(rng.randrange(SESSIONS))
    for s in range(SESSIONS):
        turn(s)
    store.close()
    print(json.dumps(got), flush=True)
"""


def test_four_processes_enqueueing_and_draining_1000_shared_keys_deliver_each_once(
    store_url: str, tmp_path: Path
) -> None:
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(WORKER), str(SESSIONS), str(KEYS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    try:
        for rnd in range(ROUNDS):
            url = _fresh(store_url, tmp_path, f"round{rnd}")
            for w in workers:
                assert w.stdin is not None
                w.stdin.write(f"go {rnd} {url}\n")
                w.stdin.flush()
            delivered: Counter[str] = Counter()
            for w in workers:
                assert w.stdout is not None
                line = w.stdout.readline()
                assert line, w.stderr.read() if w.stderr else "worker died"
                delivered.update(json.loads(line))
            delivered.update(_drain_all(url))
            twice = sorted(k for k, n in delivered.items() if n > 1)
            assert twice == [], f"round {rnd}: delivered twice: {twice[:10]}"
            assert sorted(delivered) == sorted(f"k{i}" for i in range(KEYS)), f"round {rnd}"
    finally:
        for w in workers:
            if w.stdin:
                w.stdin.close()
        for w in workers:
            w.wait(timeout=60)


# A turn loop that logs "built <keys>" once the prompt is built (before the ack) and
# "acked <keys>" after it; the parent SIGKILLs it at a random point.
DRAINER = """
import json, os, sys
from agentplug import PluginHost
from agentplug.store import open_store_url
url, log_path, sessions, lease_ms, mode = sys.argv[1:6]
store = open_store_url(url)
host = PluginHost(store=store)
log = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
print("ready", flush=True)
for s in range(int(sessions)):
    claim = host.gateway.sessions.claim_injections(f"agent:main:s{s}", lease_ms=int(lease_ms))
    if mode == "crash-after-claim" and claim.entries:
        os.kill(os.getpid(), 9)
    keys = [e["idempotency_key"] for e in claim.entries]
    os.write(log, ("built " + json.dumps(keys) + "\\n").encode())
    host.gateway.sessions.ack_injections(claim)
    os.write(log, ("acked " + json.dumps(keys) + "\\n").encode())
"""


def _enqueue(url: str, keys: int) -> None:
    host, store = _host(url)
    try:
        for i in range(keys):
            host.gateway.sessions.enqueue_injection(
                PLUGIN, _session(i), f"t{i}", idempotency_key=f"k{i}"
            )
    finally:
        store.close()


def _log(path: Path) -> tuple[Counter[str], set[str]]:
    built: Counter[str] = Counter()
    acked: set[str] = set()
    if not path.exists():
        return built, acked
    for line in path.read_text().splitlines():
        kind, _, payload = line.partition(" ")
        try:
            keys = json.loads(payload)
        except json.JSONDecodeError:
            continue  # a line cut by the kill
        if kind == "built":
            built.update(keys)
        elif kind == "acked":
            acked.update(keys)
    return built, acked


def _drainer(url: str, log: Path, lease_ms: int, mode: str = "loop") -> subprocess.Popen[str]:
    code = textwrap.dedent(DRAINER)
    args = [url, str(log), str(SESSIONS), str(lease_ms), mode]
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _fresh(store_url: str, tmp_path: Path, name: str) -> str:
    """An empty store beside ``store_url``: idempotency keys remembered by an earlier
    round must not swallow this round's enqueues. Created (schema, WAL) before use."""
    if store_url.startswith("sqlite:///"):
        url = f"sqlite:///{tmp_path / f'{name}.sqlite3'}"
    else:
        import psycopg

        base, _, _db = store_url.rpartition("/")
        database = f"{_db}_{name}"
        with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
            conn.execute(f"CREATE DATABASE {database}")
        url = f"{base}/{database}"
    open_store_url(url).close()
    return url


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_drainer_killed_at_random_points_loses_no_injection_and_repeats_none_acked(
    store_url: str, tmp_path: Path
) -> None:
    lease_ms = 300
    rng = random.Random(1809)
    keys = 200
    for rnd in range(ROUNDS):
        url = _fresh(store_url, tmp_path, f"kill{rnd}")
        _enqueue(url, keys)
        log = tmp_path / f"kill{rnd}.log"
        proc = _drainer(url, log, lease_ms)
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0, 0.25))  # somewhere in the 50 claim/build/ack steps
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        built, acked = _log(log)
        time.sleep(lease_ms / 1000 * 2)  # every lease the dead drainer held runs out
        after = Counter(_drain_all(url))
        everything = built + after
        assert sorted(everything) == sorted(f"k{i}" for i in range(keys)), f"round {rnd}"
        assert acked.isdisjoint(after), f"round {rnd}: acked keys delivered again"
        assert all(n == 1 for n in after.values())


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_crash_right_after_the_claim_commit_loses_none_of_the_claimed_injections(
    store_url: str, tmp_path: Path
) -> None:
    url = _fresh(store_url, tmp_path, "crash")
    host, store = _host(url)
    for i in range(5):
        host.gateway.sessions.enqueue_injection(
            PLUGIN, _session(0), f"t{i}", idempotency_key=f"k{i}"
        )
    store.close()
    # A lease long enough that a loaded machine still checks it before it ends.
    lease_s = 5.0
    proc = _drainer(url, tmp_path / "crash.log", int(lease_s * 1000), "crash-after-claim")
    proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert _drain_all(url) == []  # still leased to the dead turn
    time.sleep(lease_s + 0.3)
    assert sorted(_drain_all(url)) == [f"k{i}" for i in range(5)]  # 5 of 5 come back


EXT_WORKER = """
import sys
from agentplug import PluginHost
from agentplug.store import open_store_url
url, me, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = open_store_url(url)
host = PluginHost(store=store)
host.gateway.sessions.register_extension("wf", "tally", default={})
for i in range(n):
    host.gateway.sessions.patch("agent:main:s0", "wf", "tally", {f"{me}-{i}": i})
store.close()
"""


def test_extension_patches_from_several_processes_all_land(store_url: str, tmp_path: Path) -> None:
    url = _fresh(store_url, tmp_path, "ext")
    n = 100
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(EXT_WORKER), url, f"p{w}", str(n)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for w in range(3)
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    host, store = _host(url)
    try:
        host.gateway.sessions.register_extension("wf", "tally", default={})
        state = host.gateway.sessions.get_state("agent:main:s0", "wf", "tally")
    finally:
        store.close()
    assert sorted(state) == sorted(f"p{w}-{i}" for w in range(3) for i in range(n))
