"""Cron leadership across gateways (issue 15 item 4): one lease holder runs the jobs,
each tick at most once, and ``cron_reconciled`` reports the leader.

Unit rules on a MemoryStore here; real subprocesses sharing SQLite and PostgreSQL in
``test_cron_cluster_multiprocess.py``.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost
from agentplug.services.cron_cluster import (
    LEASE_NAMESPACE,
    TICKS_NAMESPACE,
    ClusterCron,
    CronLease,
    CronTick,
    wall_ms,
)
from agentplug.store import MemoryStore, StateStoreUnavailable

HOUR = 3_600_000


def just_due() -> int:
    """A ``start_ms`` whose first tick came due a moment ago (hourly jobs run it once)."""
    return wall_ms() - 5


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class FlakyStore(MemoryStore):
    """A MemoryStore that answers ``StateStoreUnavailable`` while ``down`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.down = False

    def _check(self) -> None:
        if self.down:
            raise StateStoreUnavailable("state store memory: connection refused")

    def get(self, namespace: str, key: str) -> Any | None:
        self._check()
        return super().get(namespace, key)

    def put(self, namespace: str, key: str, value: Any) -> None:
        self._check()
        super().put(namespace, key, value)

    def put_if_absent(self, namespace: str, key: str, value: Any) -> bool:
        self._check()
        return super().put_if_absent(namespace, key, value)

    def atomic(self, *locks: str) -> Any:
        self._check()
        return super().atomic(*locks)


def recorder(host: PluginHost) -> list[tuple[str, dict[str, Any]]]:
    """Register a plugin recording every cron hook (name, event fields + leader)."""
    seen: list[tuple[str, dict[str, Any]]] = []

    def plugin(api: PluginApi) -> None:
        def reconciled(event: Any, ctx: Any) -> None:
            seen.append(
                (
                    "cron_reconciled",
                    {
                        "reason": event.reason,
                        "leader": ctx.leader,
                        "is_leader": ctx.is_leader,
                        "scheduler": ctx.get_cron(),
                    },
                )
            )

        def changed(event: Any, ctx: Any) -> None:
            seen.append(
                (
                    "cron_changed",
                    {
                        "reason": event.reason,
                        "job": event.job.id,
                        "status": event.job.state.last_run_status,
                        "error": event.job.state.last_error,
                        "leader": ctx.leader,
                    },
                )
            )

        api.on("cron_reconciled", reconciled)
        api.on("cron_changed", changed)

    host.register(plugin, "cron-recorder")
    return seen


# -- the lease ---------------------------------------------------------------------------


def test_the_lease_is_taken_when_no_gateway_holds_it() -> None:
    store = MemoryStore()
    lease = CronLease(store, "a", lease_ms=1000)
    assert lease.acquire() is True
    assert lease.holds() and lease.leader() == "a"
    record = store.get(LEASE_NAMESPACE, "cron")
    assert isinstance(record, dict) and record["node"] == "a"


def test_the_lease_is_not_taken_while_another_gateway_holds_it_unexpired() -> None:
    store, clock = MemoryStore(), Clock()
    a = CronLease(store, "a", lease_ms=1000, clock=clock)
    b = CronLease(store, "b", lease_ms=1000, clock=clock)
    assert a.acquire()
    clock.now += 999
    assert b.acquire() is False
    assert not b.holds() and b.holder == "a"
    assert a.acquire()  # the holder renews
    clock.now += 999
    assert b.acquire() is False


def test_the_lease_is_taken_after_it_expired() -> None:
    store, clock = MemoryStore(), Clock()
    a = CronLease(store, "a", lease_ms=1000, clock=clock)
    b = CronLease(store, "b", lease_ms=1000, clock=clock)
    assert a.acquire()
    clock.now += 1000
    assert b.acquire() is True
    assert b.leader() == "b" and b.term == a.term + 1
    assert a.acquire() is False and a.holder == "b"


def test_a_released_lease_is_taken_at_once() -> None:
    store = MemoryStore()
    a, b = CronLease(store, "a", lease_ms=60_000), CronLease(store, "b", lease_ms=60_000)
    assert a.acquire() and not b.acquire()
    assert a.release() is True and not a.holds()
    assert b.acquire() is True
    assert a.release() is False  # not the holder: nothing to give up


def test_a_gateway_trusts_its_lease_no_longer_than_lease_ms() -> None:
    lease = CronLease(MemoryStore(), "a", lease_ms=1)
    assert lease.acquire()
    asyncio.run(asyncio.sleep(0.01))
    assert not lease.holds()
    assert lease.claim_tick("job", 1) is False


def test_a_tick_is_claimed_once_even_by_two_gateways_that_both_held_the_lease() -> None:
    store, clock = MemoryStore(), Clock()
    a = CronLease(store, "a", lease_ms=60_000, clock=clock)
    b = CronLease(store, "b", lease_ms=60_000, clock=clock)
    assert a.acquire()
    clock.now += 60_000  # a stalled: its lease ran out in the store but a still trusts it
    assert b.acquire() and a.holds() and b.holds()
    assert a.claim_tick("job", 7) is True
    assert b.claim_tick("job", 7) is False
    assert a.claim_tick("job", 7) is False
    assert b.claim_tick("job", 8) is True


def test_a_gateway_without_the_lease_claims_no_tick() -> None:
    store = MemoryStore()
    a, b = CronLease(store, "a"), CronLease(store, "b")
    assert a.acquire() and not b.acquire()
    assert b.claim_tick("job", 1) is False
    assert store.items(TICKS_NAMESPACE) == []


def test_old_tick_records_are_pruned() -> None:
    store = MemoryStore()
    lease = CronLease(store, "a")
    assert lease.acquire()
    for tick in range(10):
        assert lease.claim_tick("job", tick)
    assert lease.claim_tick("other", 1)
    assert lease.prune("job", 7) == 7
    assert [lease.tick_record("job", t) is not None for t in range(10)] == [False] * 7 + [True] * 3
    assert lease.tick_record("other", 1) is not None


# -- the runner --------------------------------------------------------------------------


def test_only_the_lease_holder_runs_a_due_tick_and_runs_it_once() -> None:
    async def scenario() -> None:
        store = MemoryStore()
        ran: list[tuple[str, int]] = []
        crons = []
        start = just_due()
        for node in ("a", "b", "c"):
            cron = ClusterCron(PluginHost(), store=store, node_id=node, lease_ms=60_000)

            def job(t: CronTick, node: str = node) -> None:
                ran.append((node, t.tick))

            cron.add_job("beat", HOUR, job, start_ms=start)
            crons.append(cron)
        for _ in range(3):
            for cron in crons:
                await cron.tick_once()
        assert len(ran) == 1 and ran[0][0] == "a"
        assert [c.is_leader for c in crons] == [True, False, False]

    asyncio.run(scenario())


def test_a_job_error_is_recorded_and_the_loop_keeps_running() -> None:
    async def scenario() -> None:
        host = PluginHost(store=MemoryStore())
        seen = recorder(host)
        cron = ClusterCron(host, store=host.gateway.store, node_id="a", lease_ms=1000, poll_ms=5)
        calls: list[int] = []
        three = asyncio.Event()

        async def failing(tick: CronTick) -> None:
            calls.append(tick.tick)
            if len(calls) >= 3:
                three.set()
            raise RuntimeError(f"boom {tick.tick}")

        cron.add_job("bad", 20, failing)
        loop = asyncio.create_task(cron.run())
        # Stop only once three runs failed (the deadline is a hang guard, not a timing).
        await asyncio.wait_for(three.wait(), 60)
        cron.stop()
        await loop
        assert len(calls) >= 3
        runs = cron.runs("bad")
        assert runs and all(r.status == "error" for r in runs)
        assert runs[0].error == f"RuntimeError: boom {runs[0].tick}"
        finished = [e for name, e in seen if name == "cron_changed" and e["reason"] == "finished"]
        assert finished and all(e["status"] == "error" for e in finished)
        assert finished[0]["error"].startswith("RuntimeError: boom")
        assert cron.scheduler.get("bad").state.last_run_status == "error"  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_a_run_is_announced_by_cron_changed_started_then_finished() -> None:
    async def scenario() -> None:
        host = PluginHost(store=MemoryStore())
        seen = recorder(host)
        cron = ClusterCron(host, store=host.gateway.store, node_id="a")
        cron.add_job("beat", HOUR, lambda tick: None, start_ms=just_due())
        runs = await cron.tick_once()
        assert [(r.job_id, r.status) for r in runs] == [("beat", "ok")]
        changed = [(e["reason"], e["status"]) for n, e in seen if n == "cron_changed"]
        assert changed == [("added", None), ("started", None), ("finished", "ok")]

    asyncio.run(scenario())


def test_cron_reconciled_reports_the_leader_and_again_when_the_lease_moves() -> None:
    async def scenario() -> None:
        store = MemoryStore()
        host_a, host_b = PluginHost(store=store), PluginHost(store=store)
        seen_a, seen_b = recorder(host_a), recorder(host_b)
        a = ClusterCron(host_a, store=host_a.gateway.store, node_id="a", lease_ms=60_000)
        b = ClusterCron(host_b, store=host_b.gateway.store, node_id="b", lease_ms=60_000)
        await a.tick_once()
        await b.tick_once()
        await a.tick_once()  # no change: no second cron_reconciled
        rec_a = [e for n, e in seen_a if n == "cron_reconciled"]
        rec_b = [e for n, e in seen_b if n == "cron_reconciled"]
        assert [(e["reason"], e["leader"], e["is_leader"]) for e in rec_a] == [
            ("startup", "a", True)
        ]
        assert [(e["reason"], e["leader"], e["is_leader"]) for e in rec_b] == [
            ("startup", "a", False)
        ]
        assert rec_a[0]["scheduler"] is a.scheduler
        a.stop()
        await a.run()  # returns at once and releases the lease
        await b.tick_once()
        rec_b = [e for n, e in seen_b if n == "cron_reconciled"]
        assert [(e["reason"], e["leader"], e["is_leader"]) for e in rec_b][-1] == (
            "reload",
            "b",
            True,
        )
        assert b.leader == "b"

    asyncio.run(scenario())


def test_a_store_outage_means_not_leader_and_no_job_runs(caplog: pytest.LogCaptureFixture) -> None:
    async def scenario() -> None:
        store = FlakyStore()
        host = PluginHost(store=store)
        seen = recorder(host)
        cron = ClusterCron(host, store=host.gateway.store, node_id="a", lease_ms=60_000, poll_ms=1)
        ran: list[int] = []
        cron.add_job("beat", HOUR, lambda tick: ran.append(tick.tick), start_ms=just_due())
        await cron.tick_once()
        assert cron.is_leader and len(ran) == 1
        store.down = True
        with caplog.at_level(logging.WARNING, logger="agentplug.cron"):
            for _ in range(5):
                await asyncio.sleep(0.003)
                assert await cron.tick_once() == []
        assert len(ran) == 1 and not cron.is_leader
        outage = [r for r in caplog.records if "unavailable" in r.getMessage()]
        assert len(outage) == 1  # one line for the whole outage
        last = [e for n, e in seen if n == "cron_reconciled"][-1]
        assert (last["leader"], last["is_leader"]) == (None, False)
        store.down = False
        await cron.tick_once()
        assert cron.is_leader and len(ran) == 1  # the tick that already ran stays done
        last = [e for n, e in seen if n == "cron_reconciled"][-1]
        assert (last["leader"], last["is_leader"]) == ("a", True)

    asyncio.run(scenario())


def test_an_outage_while_a_tick_is_claimed_runs_nothing_unclaimed() -> None:
    async def scenario() -> None:
        store = FlakyStore()
        cron = ClusterCron(PluginHost(), store=store, node_id="a", lease_ms=60_000, poll_ms=1)
        ran: list[int] = []

        def job(tick: CronTick) -> None:
            ran.append(tick.tick)
            store.down = True  # the store goes away during the run

        cron.add_job("beat", 1, job, catch_up_ms=50)
        runs = await cron.tick_once()
        assert len(runs) == 1 and ran == [runs[0].tick]  # the next claims failed: no run

    asyncio.run(scenario())


def test_a_missed_tick_within_catch_up_runs_late_and_older_ones_are_skipped() -> None:
    async def scenario() -> None:
        cron = ClusterCron(
            PluginHost(), store=MemoryStore(), node_id="a", lease_ms=60_000, poll_ms=1
        )
        ran: list[int] = []
        # Ticks 0, 1, 2 came due 2500, 1500 and 500 ms ago; 0 is older than the catch-up.
        start = wall_ms() - 2500
        cron.add_job("beat", 1000, lambda t: ran.append(t.tick), start_ms=start, catch_up_ms=2000)
        await cron.tick_once()
        assert ran == [1, 2]
        await cron.tick_once()
        assert ran == [1, 2]  # nothing new came due

    asyncio.run(scenario())


def test_a_job_ends_at_end_ms_and_starts_at_start_ms() -> None:
    async def scenario() -> None:
        cron = ClusterCron(PluginHost(), store=MemoryStore(), node_id="a", lease_ms=60_000)
        ran: list[str] = []
        now = wall_ms()
        cron.add_job("later", 10, lambda t: ran.append("later"), start_ms=now + 60_000)
        cron.add_job(  # ended a minute ago: beyond any catch-up window
            "over", 10, lambda t: ran.append("over"), start_ms=now - 120_000, end_ms=now - 60_000
        )
        assert await cron.tick_once() == []
        assert ran == []

    asyncio.run(scenario())


def test_a_lost_lease_aborts_the_signal_given_to_running_jobs() -> None:
    async def scenario() -> None:
        store = MemoryStore()
        cron = ClusterCron(PluginHost(), store=store, node_id="a", lease_ms=60_000)
        got: list[CronTick] = []
        cron.add_job("beat", HOUR, got.append, start_ms=just_due())
        await cron.tick_once()
        other = CronLease(store, "b", lease_ms=60_000)
        store.delete(LEASE_NAMESPACE, "cron")  # as if a's lease had run out and ...
        assert other.acquire()  # ... b took it
        await cron.tick_once()
        assert got and got[0].abort_signal.aborted
        assert cron.leader == "b" and not cron.is_leader

    asyncio.run(scenario())


def test_a_held_lease_stays_trusted_while_its_renewal_runs() -> None:
    import threading

    class SlowStore(MemoryStore):
        def __init__(self) -> None:
            super().__init__()
            self.entered, self.go = threading.Event(), threading.Event()
            self.slow = False

        def atomic(self, *locks: str) -> Any:
            if self.slow:
                self.entered.set()
                self.go.wait(10)
            return super().atomic(*locks)

    store = SlowStore()
    lease = CronLease(store, "a", lease_ms=60_000)
    assert lease.acquire()
    store.slow = True
    renewal = threading.Thread(target=lease.acquire)
    renewal.start()
    assert store.entered.wait(10)
    try:
        assert lease.holds()  # mid-renewal: still this node's lease
        assert lease.claim_tick("beat", 7)
    finally:
        store.go.set()
        renewal.join(10)
    assert lease.holds()


def test_a_tick_not_claimed_because_the_lease_lapsed_runs_on_a_later_poll() -> None:
    async def scenario() -> None:
        cron = ClusterCron(PluginHost(), store=MemoryStore(), node_id="a", lease_ms=60_000)
        ran: list[int] = []
        cron.add_job("beat", HOUR, lambda t: ran.append(t.tick), start_ms=just_due())
        claim = cron.lease.claim_tick
        lapses = [True]

        def lapsing(job_id: str, tick: int) -> bool:
            if lapses and lapses.pop():
                cron.lease._valid_until = 0.0  # as if the lease lapsed just now
            return claim(job_id, tick)

        cron.lease.claim_tick = lapsing  # type: ignore[method-assign]
        assert await cron.tick_once() == []  # not claimed, not run ...
        runs = await cron.tick_once()  # ... and the next poll runs it
        assert [r.status for r in runs] == ["ok"] and len(ran) == 1

    asyncio.run(scenario())


def test_stopping_the_runner_aborts_the_signal_of_running_jobs() -> None:
    async def scenario() -> None:
        cron = ClusterCron(PluginHost(), store=MemoryStore(), node_id="a", lease_ms=60_000)
        seen: list[bool] = []
        started = asyncio.Event()

        async def job(tick: CronTick) -> None:
            started.set()
            await tick.abort_signal.wait()
            seen.append(tick.abort_signal.aborted)

        cron.add_job("long", HOUR, job, start_ms=just_due())
        task = asyncio.create_task(cron.run())
        # Stop only once the job runs: a fixed number of polls raced slow machines.
        await asyncio.wait_for(started.wait(), 30)
        cron.stop()
        await asyncio.wait_for(task, 10)
        assert seen == [True]

    asyncio.run(scenario())


def test_a_locked_sqlite_file_counts_as_an_outage_and_the_loop_keeps_running() -> None:
    import sqlite3

    class LockedStore(FlakyStore):
        def _check(self) -> None:
            if self.down:
                raise sqlite3.OperationalError("database is locked")

    async def scenario() -> None:
        store = LockedStore()
        cron = ClusterCron(PluginHost(), store=store, node_id="a", lease_ms=60_000, poll_ms=1)
        ran: list[int] = []
        cron.add_job("beat", 1, lambda t: ran.append(t.tick), catch_up_ms=0)
        store.down = True
        assert await cron.tick_once() == []  # no exception: not leader while locked
        assert not cron.is_leader and ran == []
        store.down = False
        await asyncio.sleep(0.005)
        assert await cron.tick_once() and cron.is_leader

    asyncio.run(scenario())
