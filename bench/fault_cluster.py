"""Three gateways on one PostgreSQL under faults, and the checks made at the end.

:func:`run_faults` starts three :mod:`fault_gateway` processes on one database (turns,
approvals asked on one gateway and answered on another, next-turn injections, key
writes, a ``ClusterCron`` job), SIGKILLs one of them every ``kill_every_s`` seconds
(in turn) and starts it again at once, restarts the database once (``restart_db``: a
fast restart cuts every connection), stops them all, waits for every injection lease
to run out, then checks the store against what each process logged as confirmed:

* **no confirmed write lost**: every key write a process logged is in the store; every
  turn logged as replied has its user message in one of its lane's stored conversations
  (and no turn was replied twice: a restarted gateway goes on where they end); every
  injection logged as enqueued was delivered by a turn, is marked delivered, or is still
  queued; every approval decision a process logged stands in the store;
* **no injection delivered twice**: no idempotency key in two turns' prompts, none both
  delivered and still queued;
* **no cron tick run twice or skipped**: every tick of the job started exactly once
  (the job's ``catch_up_ms`` covers a failover and the restart, so a tick missed while
  the lease moved runs late instead of being skipped);
* **no approval decided twice**: at most one process was told its decision stands, and
  the audit queue holds at most one entry per approval.

It reports how long approvals took from the decision (recorded by the deciding gateway)
to the asking gateway waking, p50 / p99, apart for the decisions made while every
gateway and the database were up and those made during a fault (a kill until the
restarted process is ready, the database restart until 2 s after it returned).

``bench/bench_faults.py`` runs it on a server it starts (5 minutes by default);
``tests/services/test_fault_cluster.py`` runs it on the test suite's server, short.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import workload  # noqa: E402
from fault_gateway import (  # noqa: E402
    LANES_NAMESPACE,
    WRITES_NAMESPACE,
    lane_conversations,
    session_keys,
    turn_text,
)

GATEWAY = str(HERE / "fault_gateway.py")
SETTLE_S = 2.0
"""How long after the database restart returned decisions still count as 'during a fault'."""


@dataclass
class FaultSettings:
    """The run's shape (the defaults: the 5-minute run of ``make bench``)."""

    duration_s: float = 300.0
    kill_every_s: float = 30.0
    db_restart_at_s: float = 135.0
    gateways: int = 3
    sessions: int = 3
    """Sessions (turn lanes) per gateway."""
    model_ms: int = 20
    turn_pause_ms: int = 100
    cron_every_ms: int = 1000
    cron_work_ms: int = 100
    lease_ms: int = 3000
    poll_ms: int = 250
    catch_up_ms: int = 120_000
    injection_lease_ms: int = 3000
    approval_timeout_ms: int = 60_000
    retry_ms: int = 20_000
    ready_timeout_s: float = 120.0


def _spec(node: str, url: str, work: Path, s: FaultSettings, cron: tuple[int, int]) -> str:
    return json.dumps(
        {
            "node": node,
            "url": url,
            "log": str(work / f"{node}.log"),
            "stop": str(work / "stop"),
            "nodes": [f"g{i}" for i in range(s.gateways)],
            "sessions": s.sessions,
            "model_ms": s.model_ms,
            "turn_pause_ms": s.turn_pause_ms,
            "cron_every_ms": s.cron_every_ms,
            "cron_work_ms": s.cron_work_ms,
            "cron_start_ms": cron[0],
            "cron_end_ms": cron[1],
            "lease_ms": s.lease_ms,
            "poll_ms": s.poll_ms,
            "catch_up_ms": s.catch_up_ms,
            "injection_lease_ms": s.injection_lease_ms,
            "approval_timeout_ms": s.approval_timeout_ms,
            "retry_ms": s.retry_ms,
        }
    )


def _lines(path: Path) -> list[list[str]]:
    if not path.exists():
        return []
    return [line.split() for line in path.read_text().splitlines() if line.strip()]


def _ready_count(path: Path) -> int:
    return sum(1 for parts in _lines(path) if parts[0] == "ready")


class _Cluster:
    def __init__(self, url: str, work: Path, s: FaultSettings, cron: tuple[int, int]) -> None:
        self.url, self.work, self.s, self.cron = url, work, s, cron
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.exits: list[tuple[str, int]] = []

    def start(self, node: str) -> None:
        err = (self.work / f"{node}.stderr").open("ab")
        self.procs[node] = subprocess.Popen(
            [sys.executable, GATEWAY, _spec(node, self.url, self.work, self.s, self.cron)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        err.close()

    def wait_ready(self, node: str, count: int) -> None:
        deadline = time.monotonic() + self.s.ready_timeout_s
        log = self.work / f"{node}.log"
        while _ready_count(log) < count:
            proc = self.procs[node]
            if proc.poll() is not None:
                raise RuntimeError(f"gateway {node} exited {proc.returncode}: {self.stderr(node)}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"gateway {node} not ready after {self.s.ready_timeout_s} s")
            time.sleep(0.05)

    def stderr(self, node: str) -> str:
        path = self.work / f"{node}.stderr"
        return path.read_text(errors="replace")[-1500:] if path.exists() else ""

    def stop_all(self) -> None:
        (self.work / "stop").touch()
        for node, proc in self.procs.items():
            try:
                proc.wait(timeout=self.s.approval_timeout_ms / 1000 + 60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            self.exits.append((node, proc.returncode))

    def kill_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def run_faults(
    url: str,
    restart_db: Callable[[], None],
    work: Path,
    settings: FaultSettings | None = None,
    *,
    progress: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """Run the cluster on ``url`` (an empty database) in ``work``; the report and the
    problems found (``report["problems"]``, empty when every check passed)."""
    from agentplug.services.cron_cluster import wall_ms
    from agentplug.store import open_store_url

    s = settings or FaultSettings()
    work.mkdir(parents=True, exist_ok=True)
    open_store_url(url).close()  # the schema, once, before the gateways race
    nodes = [f"g{i}" for i in range(s.gateways)]
    first_tick = wall_ms() + 3000
    # The last tick is due well before the stop, so that a failover near the end still
    # runs it (the checks expect every tick).
    tail_ms = 2 * s.lease_ms + 5000
    cron = (first_tick, first_tick + max(int(s.duration_s * 1000) - tail_ms, s.cron_every_ms))
    cluster = _Cluster(url, work, s, cron)
    faults: list[dict[str, Any]] = []
    restarts: list[float] = []
    try:
        for node in nodes:
            cluster.start(node)
        for node in nodes:
            cluster.wait_ready(node, 1)
        started = time.time()
        progress(f"{len(nodes)} gateways ready")
        readies = dict.fromkeys(nodes, 1)
        next_kill, victim, db_done = s.kill_every_s, 0, False
        while (now := time.time() - started) < s.duration_s:
            if not db_done and now >= s.db_restart_at_s:
                began = time.time()
                restart_db()
                faults.append({"what": "database restart", "start": began, "end": time.time()})
                progress(f"database restarted in {time.time() - began:.1f} s")
                db_done = True
            elif now >= next_kill:
                node = nodes[victim % len(nodes)]
                victim += 1
                next_kill += s.kill_every_s
                began = time.time()
                cluster.procs[node].send_signal(signal.SIGKILL)
                cluster.procs[node].wait(timeout=30)
                cluster.start(node)
                readies[node] += 1
                cluster.wait_ready(node, readies[node])
                restarts.append(time.time() - began)
                faults.append({"what": f"kill {node}", "start": began, "end": time.time()})
                progress(f"killed {node}, ready again in {restarts[-1]:.1f} s")
            else:
                time.sleep(0.1)
        cluster.stop_all()
    finally:
        cluster.kill_all()
    bad_exits = [
        f"{node} exited {code} at the stop: {cluster.stderr(node)}"
        for node, code in cluster.exits
        if code != 0
    ]
    time.sleep(s.injection_lease_ms / 1000 * 1.5)  # the killed turns' claims run out
    report = check(url, work, nodes, s, cron, faults)
    report["checks"]["bad_exits"] = bad_exits
    report["problems"] = bad_exits + report["problems"]
    report.update(
        settings=asdict(s),
        faults=faults,
        kills=len(restarts),
        restart_s=[round(x, 2) for x in restarts],
        load=workload.load_average(),
    )
    return report


def _parse(work: Path, nodes: list[str]) -> dict[str, list[list[str]]]:
    by_kind: dict[str, list[list[str]]] = {}
    for node in nodes:
        for parts in _lines(work / f"{node}.log"):
            by_kind.setdefault(parts[0], []).append([node, *parts[1:]])
    return by_kind


CHECKS = {
    "writes_lost": "confirmed key writes missing from the store",
    "turns_lost": "replied turns whose user message is not in the stored transcript",
    "turns_twice": "turns of a lane replied twice (a restart did not go on where it ended)",
    "injections_lost": "confirmed injections neither delivered, marked delivered nor queued",
    "injections_twice": "injections in two turns' prompts, or delivered and still queued",
    "ticks_twice": "cron ticks started twice",
    "ticks_skipped": "cron ticks never started",
    "approvals_twice": "approvals two processes were told they decided, or audited twice",
    "decisions_lost": "approval decisions a process was told stand, missing from the store",
    "woke_against_decision": "askers that woke with another verdict than the stored one",
}
"""The end checks, by name: each lists what broke its rule (empty: passed)."""


def check(
    url: str,
    work: Path,
    nodes: list[str],
    s: FaultSettings,
    cron: tuple[int, int],
    faults: list[dict[str, Any]],
) -> dict[str, Any]:
    """The end checks (:data:`CHECKS`) and the approval latencies."""
    from agentplug import Gateway
    from agentplug.agent.transcript import StateStoreTranscripts
    from agentplug.services.approvals.shared import AUDIT_NAMESPACE, DECISIONS_NAMESPACE
    from agentplug.services.sessions.state import DELIVERED_NS
    from agentplug.store import open_store_url

    logged = _parse(work, nodes)
    found: dict[str, list[str]] = {name: [] for name in CHECKS}
    store = open_store_url(url)
    try:
        stored = {key for key, _ in store.items(WRITES_NAMESPACE)}
        puts = [parts[1] for parts in logged.get("put", [])]
        found["writes_lost"] = [key for key in puts if key not in stored]
        transcripts = StateStoreTranscripts(store)
        lanes = [lane for node in nodes for lane in session_keys(node, s.sessions)]
        stored_sessions = transcripts.keys()
        # Every conversation a lane had, and the one it was on (it may have no turn yet).
        conversations = {
            lane: set(lane_conversations(stored_sessions, lane))
            | {str(c) for c in [store.get(LANES_NAMESPACE, lane)] if c}
            for lane in lanes
        }
        texts: dict[str, set[str]] = {}
        for lane in lanes:
            records = [transcripts.load(key) for key in sorted(conversations[lane])]
            texts[lane] = {
                str(m.get("content"))
                for record in records
                for m in (record.messages if record else [])
                if m.get("role") == "user"
            }
        turns = logged.get("turn", [])
        found["turns_lost"] = [
            f"{p[1]}#{p[2]}" for p in turns if turn_text(p[1], int(p[2])) not in texts[p[1]]
        ]
        replied = Counter(f"{p[1]}#{p[2]}" for p in turns)
        found["turns_twice"] = sorted(turn for turn, n in replied.items() if n > 1)
        enqueued = {parts[1]: parts[2] for parts in logged.get("enqueued", [])}
        delivered = Counter(key for parts in logged.get("delivered", []) for key in parts[2:])
        gateway = Gateway(store=store)
        queues = set().union(*conversations.values()) | {p[2] for p in logged.get("enqueued", [])}
        left = Counter(
            str(entry.get("idempotency_key"))
            for session in sorted(queues)
            for entry in gateway.sessions.drain_injections(session)
        )
        found["injections_twice"] = sorted(
            {k for k, n in delivered.items() if n > 1} | (set(left) & set(delivered))
        )
        marked = {key.rstrip("/").rsplit("/", 1)[-1] for key, _ in store.items(DELIVERED_NS)}
        found["injections_lost"] = sorted(
            k for k in enqueued if k not in delivered and k not in left and k not in marked
        )
        starts = Counter(int(parts[1]) for parts in logged.get("start", []))
        ticks = len(range(cron[0], cron[1], s.cron_every_ms))
        found["ticks_twice"] = [str(t) for t, n in sorted(starts.items()) if n > 1]
        found["ticks_skipped"] = [str(t) for t in sorted(set(range(ticks)) - set(starts))]
        decisions = {
            key: value for key, value in store.items(DECISIONS_NAMESPACE) if isinstance(value, dict)
        }
        wins = Counter(parts[1] for parts in logged.get("decided", []))
        audit = Counter(str(e.get("approval_id")) for e in store.peek(AUDIT_NAMESPACE, "audit"))
        found["approvals_twice"] = sorted(
            {a for a, n in wins.items() if n > 1} | {a for a, n in audit.items() if n > 1}
        )
        found["decisions_lost"] = sorted(a for a in wins if a not in decisions)
        woke = logged.get("woke", [])
        found["woke_against_decision"] = [
            p[1]
            for p in woke
            if p[1] in decisions
            and decisions[p[1]]["resolution"] != "timeout"
            and (p[2] == "True") != (decisions[p[1]]["resolution"] != "deny")
        ]
    finally:
        store.close()
    calm: list[float] = []
    faulty: list[float] = []
    for parts in woke:
        decision = decisions.get(parts[1])
        if decision is None or decision.get("resolution") == "timeout":
            continue
        at = float(decision["at"])
        latency = (float(parts[4]) - at) * 1000
        hit = any(f["start"] <= at <= f["end"] + SETTLE_S for f in faults)
        (faulty if hit else calm).append(latency)
    return {
        "checks": found,
        "problems": [
            f"{CHECKS[name]}: {len(items)}, e.g. {items[:3]}"
            for name, items in found.items()
            if items
        ],
        "counts": {
            "turns_replied": len(turns),
            "conversations": len(set().union(*conversations.values())),
            "turns_failed": len(logged.get("turn-failed", [])) + len(logged.get("turn-error", [])),
            "writes_confirmed": len(puts),
            "injections_enqueued": len(enqueued),
            "injections_delivered": sum(delivered.values()),
            "injections_left_at_end": sum(left.values()),
            "cron_ticks": ticks,
            "cron_ticks_started": sum(starts.values()),
            "approvals_decided": len(decisions),
            "approvals_woke": len(woke),
        },
        "approval_ms": {
            "all_up": _spread(calm),
            "during_faults": _spread(faulty),
        },
    }


def _spread(values: list[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "p50": round(workload.percentile(values, 50), 2),
        "p99": round(workload.percentile(values, 99), 2),
        "max": round(max(values), 2) if values else None,
    }
