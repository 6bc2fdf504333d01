"""``ClusterCron`` announces its own changes through ``cron_changed`` (HOOKS.md "Lifecycle"):
``added`` / ``updated`` / ``removed`` when the scheduler holds the change, ``scheduled``
when a run moves a job's next run time."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost
from agentplug.services import cron_cluster
from agentplug.services.cron_cluster import ClusterCron
from agentplug.store import MemoryStore

HOUR = 3_600_000


class Clock:
    """The wall clock ClusterCron reads, moved by hand."""

    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def _host() -> tuple[PluginHost, list[dict[str, Any]]]:
    host = PluginHost(store=MemoryStore())
    seen: list[dict[str, Any]] = []

    def register(api: PluginApi) -> None:
        api.on(
            "cron_changed",
            lambda event: seen.append(
                {
                    "reason": event.reason,
                    "job": event.job.id,
                    "next": event.job.state.next_run_at_ms,
                    "event_next": event.next_run_at_ms,
                }
            ),
        )

    host.register(register, "watcher")
    return host, seen


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fixed = Clock(10 * HOUR + 1_000)
    monkeypatch.setattr(cron_cluster, "wall_ms", fixed)
    return fixed


def test_adding_a_job_announces_added_with_its_next_run(clock: Clock) -> None:
    async def scenario() -> None:
        host, seen = _host()
        cron = ClusterCron(host, store=host.gateway.store, node_id="a")
        cron.add_job("beat", HOUR, lambda tick: None)
        await cron.flush_changes()
        assert seen == [{"reason": "added", "job": "beat", "next": 11 * HOUR, "event_next": None}]

    asyncio.run(scenario())


def test_adding_a_job_again_announces_updated(clock: Clock) -> None:
    async def scenario() -> None:
        host, seen = _host()
        cron = ClusterCron(host, store=host.gateway.store, node_id="a")
        cron.add_job("beat", HOUR, lambda tick: None)
        cron.add_job("beat", 2 * HOUR, lambda tick: None)
        await cron.flush_changes()
        assert [e["reason"] for e in seen] == ["added", "updated"]
        assert seen[1]["next"] == 12 * HOUR

    asyncio.run(scenario())


def test_removing_a_job_announces_removed_with_its_last_snapshot(clock: Clock) -> None:
    async def scenario() -> None:
        host, seen = _host()
        cron = ClusterCron(host, store=host.gateway.store, node_id="a")
        cron.add_job("beat", HOUR, lambda tick: None)
        cron.remove_job("beat")
        cron.remove_job("never-added")
        await cron.flush_changes()
        assert [(e["reason"], e["job"], e["next"]) for e in seen] == [
            ("added", "beat", 11 * HOUR),
            ("removed", "beat", 11 * HOUR),
        ]

    asyncio.run(scenario())


def test_changes_made_without_a_running_loop_are_announced_by_the_first_poll(
    clock: Clock,
) -> None:
    host, seen = _host()
    cron = ClusterCron(host, store=host.gateway.store, node_id="a")
    cron.add_job("beat", HOUR, lambda tick: None, start_ms=20 * HOUR)
    assert seen == []  # no loop yet: queued, in the order they happened
    asyncio.run(cron.tick_once())
    assert [(e["reason"], e["next"]) for e in seen] == [("added", 20 * HOUR)]


def test_a_run_that_moves_the_next_run_announces_scheduled_with_the_new_time(
    clock: Clock,
) -> None:
    async def scenario() -> None:
        host, seen = _host()
        cron = ClusterCron(host, store=host.gateway.store, node_id="a")
        cron.add_job("beat", HOUR, lambda tick: None, start_ms=10 * HOUR + 2_000)
        await cron.flush_changes()
        clock.now = 10 * HOUR + 2_001  # the first tick came due
        runs = await cron.tick_once()
        assert [r.status for r in runs] == ["ok"]
        reasons = [(e["reason"], e["next"], e["event_next"]) for e in seen]
        assert reasons == [
            ("added", 10 * HOUR + 2_000, None),
            ("started", 11 * HOUR + 2_000, None),
            ("scheduled", 11 * HOUR + 2_000, 11 * HOUR + 2_000),
            ("finished", 11 * HOUR + 2_000, None),
        ]

    asyncio.run(scenario())


def test_the_last_run_of_a_job_announces_scheduled_with_no_next_run(clock: Clock) -> None:
    async def scenario() -> None:
        host, seen = _host()
        cron = ClusterCron(host, store=host.gateway.store, node_id="a")
        start = 10 * HOUR + 2_000
        cron.add_job("once", HOUR, lambda tick: None, start_ms=start, end_ms=start + HOUR)
        clock.now = start + 1
        await cron.tick_once()
        scheduled = [e for e in seen if e["reason"] == "scheduled"]
        assert scheduled == [
            {"reason": "scheduled", "job": "once", "next": None, "event_next": None}
        ]

    asyncio.run(scenario())
