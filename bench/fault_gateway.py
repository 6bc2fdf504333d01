"""One gateway of the fault run (:mod:`fault_cluster` starts three; run as a script).

``python bench/fault_gateway.py SPEC_JSON``: a :class:`~agentplug.Gateway` on the shared
PostgreSQL store that, until the stop file appears, does at once:

* **turns**: one lane per session it owns (``<node>-s<i>``), each turn through
  ``gateway.runner.handle_inbound`` (the model of :mod:`workload`, one tool call); a turn
  that replied logs ``turn <lane> <k>`` (its transcript is saved: a confirmed write)
  and ``delivered <lane> <keys...>`` for the injections its prompt held. A lane starts a
  new conversation (:func:`conversation_key`) every :data:`CONVERSATION_TURNS` turns and
  records it as the lane's current one in the store (:data:`LANES_NAMESPACE`);
* **approvals asked**: one at a time, a ``web_search`` call through the tool-call gate,
  which a plugin puts behind an approval; logs ``woke <id> <allowed> <resolution> <t>``;
* **approvals answered**: every 50 ms, each pending approval another gateway asked is
  decided ``allow-once`` (``resolve_pending``); logs ``decided <id> <at>`` when this
  process's decision is the one that stands, ``refused <id>`` when another's won;
* **injections**: every 200 ms one next-turn injection into the current conversation of a
  random lane of any gateway, with a fresh idempotency key; logs ``enqueued <key>
  <session>`` once accepted;
* **writes**: every 100 ms a key put in the store; logs ``put <key>`` once confirmed;
* **cron**: a ``ClusterCron`` job ``beat``; each run logs ``start <tick>`` and ``end <tick>``.

Every line is one ``write`` to the node's log (``O_APPEND``), so a SIGKILL cuts no line in
two and a restarted process appends to the same file. A process restarted after a kill
continues its sessions where their stored transcripts end.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import workload  # noqa: E402
from agentplug import PluginApi  # noqa: E402
from agentplug.services.approvals import ProgrammaticResolver  # noqa: E402
from agentplug.services.approvals.shared import list_pending, resolve_pending  # noqa: E402
from agentplug.store import open_store_url  # noqa: E402

WRITES_NAMESPACE = "bench.writes"
INJECTING_PLUGIN = "wf"
LANES_NAMESPACE = "bench.lanes"
"""Each lane's current conversation (the session key its turns go to now)."""
CONVERSATION_TURNS = 20
"""Turns of one conversation. A turn's CPU cost grows with its transcript (the history
is handed to every hook, sent to the model and stored whole; docs/scaling.md); at a turn
every ~150 ms an endless conversation reaches thousands of messages within the run, and
the event loops would be measuring that growth instead of the cluster."""


class Log:
    """One line per event, each a single ``write`` (``O_APPEND``)."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def __call__(self, kind: str, *fields: object) -> None:
        os.write(self._fd, (" ".join([kind, *map(str, fields)]) + "\n").encode())


def session_keys(node: str, count: int) -> list[str]:
    """The sessions ``node`` runs turns for."""
    return [f"{node}-s{i}" for i in range(count)]


def conversation_key(lane: str, k: int) -> str:
    """The session key turn ``k`` of ``lane`` goes to."""
    return f"{lane}-c{k // CONVERSATION_TURNS}"


def lane_conversations(keys: list[str], lane: str) -> list[str]:
    """The conversations of ``lane`` among the session ``keys``."""
    return [key for key in keys if key.startswith(f"{lane}-c")]


def turn_text(session: str, k: int) -> str:
    """The user message of turn ``k`` of ``session``."""
    return f"{session} turn {k}"


def _approval_plugin(node: str, timeout_ms: int) -> Any:
    def register(api: PluginApi) -> None:
        def before_tool_call(event: Any, ctx: Any) -> dict[str, Any] | None:
            if event.tool_name != "web_search":
                return None
            return {
                "require_approval": {
                    "title": f"ask {node}",
                    "description": "Allow the search",
                    "timeout_ms": timeout_ms,
                }
            }

        api.on("before_tool_call", before_tool_call)

    return register


class Node:
    """The gateway and its loops."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        self.node: str = spec["node"]
        self.pid = os.getpid()
        self.log = Log(spec["log"])
        self.stop_path = Path(spec["stop"])
        self.stopping = asyncio.Event()
        self.seen: dict[str, list[str]] = {}
        workload.MODEL_S = spec["model_ms"] / 1000
        self.store = open_store_url(spec["url"], retry_ms=spec["retry_ms"])
        resolver = ProgrammaticResolver(
            on_pending=lambda p: self.log("pending", p.id, f"{time.time():.6f}")
        )
        self.gateway = workload.build_gateway(0, store=self.store, resolver=resolver)
        host = self.gateway.host
        host.register(_approval_plugin(self.node, spec["approval_timeout_ms"]), "approver")
        # A plain function: ``register`` takes a function or an object, not a bound method.
        host.register(lambda api: self._injection_watch(api), "injection-watch")
        self.gateway.sessions.injection_lease_ms = spec["injection_lease_ms"]

    def _injection_watch(self, api: PluginApi) -> None:
        def prepare(event: Any, ctx: Any) -> None:
            keys = [str(i.get("idempotency_key")) for i in event.injections]
            if keys:
                self.seen[event.run_id] = keys

        api.on("agent_turn_prepare", prepare)

    async def _pause(self, seconds: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), seconds)

    def _next_turn(self, lane: str) -> int:
        transcripts = self.gateway.runner.transcripts
        conversations = lane_conversations(transcripts.keys(), lane)
        last = max(conversations, key=lambda key: int(key.rsplit("-c", 1)[1]), default=None)
        record = transcripts.load(last) if last is not None else None
        prefix = f"{lane} turn "
        done = [
            int(str(m.get("content"))[len(prefix) :])
            for m in (record.messages if record is not None else [])
            if m.get("role") == "user" and str(m.get("content", "")).startswith(prefix)
        ]
        return max(done, default=0) + 1

    async def turns(self, lane: str) -> None:
        runner = self.gateway.runner
        while True:
            try:
                k = self._next_turn(lane)
                break
            except Exception:  # the database may be restarting: try again
                await self._pause(0.5)
                if self.stopping.is_set():
                    return
        current = None
        while not self.stopping.is_set():
            session = conversation_key(lane, k)
            if session != current:  # injections look it up before this turn runs
                try:
                    self.store.put(LANES_NAMESPACE, lane, session)
                except Exception as exc:
                    self.log("lane-error", lane, type(exc).__name__)
                    await self._pause(0.5)
                    continue
                current = session
            message = {"content": turn_text(lane, k), "session_key": session, "sender_id": "u"}
            try:
                result = await runner.handle_inbound(message)
            except Exception as exc:
                self.log("turn-error", lane, k, type(exc).__name__)
            else:
                keys = self.seen.pop(result.run_id, [])
                if result.status == "replied":
                    self.log("turn", lane, k)
                    if keys:
                        self.log("delivered", lane, *keys)
                else:
                    self.log("turn-failed", lane, k, result.status)
            k += 1
            await self._pause(self.spec["turn_pause_ms"] / 1000)

    async def ask(self) -> None:
        gate = self.gateway.tool_calls.gate
        n = 0
        while not self.stopping.is_set():
            n += 1
            event = {
                "tool_name": "web_search",
                "params": {"query": f"{self.node}-{self.pid}-{n}"},
                "run_id": f"ask-{self.node}-{self.pid}-{n}",
            }
            try:
                decision = await gate.check(event)
            except Exception as exc:
                self.log("ask-error", n, type(exc).__name__)
            else:
                self.log(
                    "woke",
                    decision.approval_id,
                    decision.allowed,
                    decision.approval_resolution,
                    f"{time.time():.6f}",
                )
            await self._pause(random.uniform(0.1, 0.4))

    async def decide(self) -> None:
        mine = f"ask {self.node}"
        while not self.stopping.is_set():
            try:
                for row in list_pending(self.store):
                    if row.get("title") == mine:
                        continue
                    reply = resolve_pending(self.store, row["id"], "allow-once", by=self.node)
                    if reply.ok:
                        self.log("decided", row["id"], f"{reply.at:.6f}")
                    else:
                        self.log("refused", row["id"], reply.status)
            except Exception as exc:
                self.log("decide-error", type(exc).__name__)
            await self._pause(0.05)

    async def inject(self) -> None:
        spec = self.spec
        lanes = [lane for node in spec["nodes"] for lane in session_keys(node, spec["sessions"])]
        n = 0
        while not self.stopping.is_set():
            n += 1
            key = f"inj-{self.node}-{self.pid}-{n}"
            lane = random.choice(lanes)
            try:
                session = self.store.get(LANES_NAMESPACE, lane) or conversation_key(lane, 1)
                receipt = self.gateway.sessions.enqueue_injection(
                    INJECTING_PLUGIN, session, f"note {key}", idempotency_key=key
                )
            except Exception as exc:
                self.log("enqueue-error", key, type(exc).__name__)
            else:
                if receipt.accepted and not receipt.duplicate:
                    self.log("enqueued", key, session)
            await self._pause(0.2)

    async def write(self) -> None:
        n = 0
        while not self.stopping.is_set():
            n += 1
            key = f"{self.node}-{self.pid}-{n}"
            try:
                self.store.put(WRITES_NAMESPACE, key, n)
            except Exception as exc:
                self.log("put-error", key, type(exc).__name__)
            else:
                self.log("put", key)
            await self._pause(0.1)

    async def beat(self, tick: Any) -> None:
        self.log("start", tick.tick, self.pid)
        await asyncio.sleep(self.spec["cron_work_ms"] / 1000)
        self.log("end", tick.tick, self.pid)

    async def watch_stop(self) -> None:
        while not self.stop_path.exists():
            await asyncio.sleep(0.05)
        self.stopping.set()

    async def run(self) -> None:
        spec = self.spec
        await self.gateway.start()
        cron = self.gateway.cluster_cron(lease_ms=spec["lease_ms"], poll_ms=spec["poll_ms"])
        cron.add_job(
            "beat",
            spec["cron_every_ms"],
            self.beat,
            start_ms=spec["cron_start_ms"],
            end_ms=spec["cron_end_ms"],
            catch_up_ms=spec["catch_up_ms"],
        )
        cron_task = asyncio.ensure_future(cron.run())
        loops = [self.turns(s) for s in session_keys(self.node, spec["sessions"])]
        loops += [self.ask(), self.decide(), self.inject(), self.write()]
        tasks = [asyncio.ensure_future(c) for c in loops]
        self.log("ready", self.pid, f"{time.time():.6f}")
        await self.watch_stop()
        cron.stop()
        # A gate still waiting for an approval (the deciders stop too) is cancelled.
        _, waiting = await asyncio.wait(tasks, timeout=5.0)
        for task in waiting:
            task.cancel()
        await asyncio.gather(cron_task, *tasks, return_exceptions=True)
        await self.gateway.stop()
        self.store.close()
        self.log("stopped", self.pid)


def main() -> None:
    spec = json.loads(sys.argv[1])
    asyncio.run(Node(spec).run())


if __name__ == "__main__":
    main()
