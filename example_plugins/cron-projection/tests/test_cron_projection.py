"""cron-projection on agentplug's fixture host, with a CronService and scheduler snapshots.

The cron adapter and the ``CronService`` are not covered by the fixtures: the tests drive
them with ``asyncio.run`` on ``agentplug_host``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost
from agentplug.core.results import HandlerStatus
from agentplug.services.lifecycle import CronService, Scheduler
from agentplug.services.signals import AbortController, AbortError, AbortSignal
from agentplug.testing.pytest_plugin import PluginLoader
from agentplug_cron_projection import (
    PLUGIN_ID,
    CronProjection,
    ExternalWake,
    JsonFileWakeHost,
    register_cron_projection,
)


class FakeWakeHost:
    """An adapter that records accepted snapshots; scripted failures and holds."""

    def __init__(self, failures: int = 0) -> None:
        self.accepted: list[list[tuple[str, int]]] = []
        self.refused_after_abort = 0
        self.failures = failures
        self.hold: asyncio.Event | None = None
        self.entered: asyncio.Event | None = None
        self.closed = False

    async def replace_all(self, wakes: Sequence[ExternalWake], *, signal: AbortSignal) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("external scheduler unavailable")
        if self.hold is not None:
            assert self.entered is not None
            self.entered.set()
            hold = asyncio.ensure_future(self.hold.wait())
            await asyncio.wait(
                {hold, asyncio.ensure_future(signal.wait())}, return_when="FIRST_COMPLETED"
            )
            hold.cancel()
        if signal.aborted:  # never accept a snapshot after its signal aborted
            self.refused_after_abort += 1
            signal.throw_if_aborted()
        self.accepted.append([(w.job_id, w.run_at_ms) for w in wakes])

    async def close(self) -> None:
        self.closed = True


class Sleeps:
    """Injectable backoff sleep: records delays, returns at once (unless aborted)."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, delay_s: float, signal: AbortSignal) -> None:
        self.delays.append(delay_s)
        signal.throw_if_aborted()


@pytest.fixture
def adapter() -> FakeWakeHost:
    return FakeWakeHost()


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def projection(
    agentplug_load: PluginLoader, adapter: FakeWakeHost, sleeps: Sleeps
) -> CronProjection:
    """The projection on ``adapter``, registered as a third-party plugin on the fixture host."""
    made: list[CronProjection] = []

    def plugin(api: PluginApi) -> None:
        made.append(register_cron_projection(api, adapter, sleep=sleeps))

    agentplug_load(plugin, PLUGIN_ID, bundled=False)
    return made[0]


@pytest.fixture
def cron(agentplug_host: PluginHost, projection: CronProjection) -> CronService:
    """The host's cron service: dispatches cron_reconciled / cron_changed to the plugin."""
    return CronService(agentplug_host)


def jobs() -> Scheduler:
    return Scheduler(
        [
            {"id": "b", "state": {"next_run_at_ms": 2000}},
            {"id": "a", "state": {"next_run_at_ms": 2000}},
            {"id": "c", "state": {"next_run_at_ms": 1000}},
            {"id": "off", "enabled": False, "state": {"next_run_at_ms": 10}},
            {"id": "idle"},
        ]
    )


def test_reconcile_projects_enabled_wakes_sorted_by_time_then_id(
    cron: CronService, adapter: FakeWakeHost, projection: CronProjection
) -> None:
    asyncio.run(cron.reconcile(jobs(), "startup"))
    assert adapter.accepted == [[("c", 1000), ("a", 2000), ("b", 2000)]]
    assert projection.applied_revision == projection.requested_revision == 1


def test_a_disabled_cron_replaces_everything_with_nothing(
    cron: CronService, adapter: FakeWakeHost
) -> None:
    async def main() -> None:
        await cron.reconcile(jobs(), "startup")
        await cron.reconcile(jobs(), "reload", enabled=False)

    asyncio.run(main())
    assert adapter.accepted[-1] == []


def test_cron_changed_before_any_baseline_does_nothing(
    cron: CronService, adapter: FakeWakeHost, projection: CronProjection
) -> None:
    asyncio.run(cron.changed({"id": "a"}, "added"))
    assert adapter.accepted == [] and projection.requested_revision == 0


def test_cron_changed_rereads_the_adopted_scheduler_only(
    cron: CronService, adapter: FakeWakeHost
) -> None:
    old, new = jobs(), Scheduler([{"id": "new", "state": {"next_run_at_ms": 7}}])

    async def main() -> None:
        await cron.reconcile(old, "startup")
        await cron.reconcile(new, "reload")
        old.schedule("a", 1)  # a late hint about the old scheduler...
        await cron.changed(old.get("a") or {}, "scheduled")
        new.put({"id": "added", "state": {"next_run_at_ms": 3}})
        await cron.changed(new.get("added") or {}, "added")

    asyncio.run(main())
    # ...never brings the old scheduler back: every re-read used the adopted one.
    assert adapter.accepted[1:] == [[("new", 7)], [("new", 7)], [("added", 3), ("new", 7)]]


def test_failures_retry_with_exponential_backoff_capped_at_30_s(
    cron: CronService, adapter: FakeWakeHost, sleeps: Sleeps, projection: CronProjection
) -> None:
    adapter.failures = 7
    asyncio.run(cron.reconcile(jobs()))
    assert sleeps.delays == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert len(adapter.accepted) == 1 and projection.applied_revision == 1


def test_backoff_resets_after_a_success(
    cron: CronService, adapter: FakeWakeHost, sleeps: Sleeps
) -> None:
    adapter.failures = 2

    async def main() -> None:
        await cron.reconcile(jobs())
        adapter.failures = 1
        await cron.changed({"id": "a"}, "updated")

    asyncio.run(main())
    assert sleeps.delays == [1.0, 2.0, 1.0]


def test_a_newer_revision_aborts_the_attempt_in_flight(
    cron: CronService, adapter: FakeWakeHost, projection: CronProjection
) -> None:
    scheduler = jobs()

    async def main() -> None:
        await cron.reconcile(scheduler)
        adapter.hold, adapter.entered = asyncio.Event(), asyncio.Event()
        first = asyncio.ensure_future(cron.changed({"id": "a"}, "updated"))
        await adapter.entered.wait()  # revision 2 is inside replace_all
        scheduler.remove("c")
        adapter.hold = None
        await cron.changed({"id": "c"}, "removed")  # revision 3 aborts revision 2
        await first

    asyncio.run(main())
    assert adapter.refused_after_abort == 1
    assert adapter.accepted[-1] == [("a", 2000), ("b", 2000)]
    assert projection.applied_revision == projection.requested_revision == 3


def test_a_newer_scheduler_snapshot_aborts_the_old_snapshots_attempt(
    cron: CronService, adapter: FakeWakeHost
) -> None:
    async def main() -> None:
        adapter.hold, adapter.entered = asyncio.Event(), asyncio.Event()
        first = asyncio.ensure_future(cron.reconcile(jobs(), "startup"))
        await adapter.entered.wait()
        adapter.hold = None
        await cron.reconcile(Scheduler([{"id": "z", "state": {"next_run_at_ms": 1}}]), "reload")
        await first

    asyncio.run(main())
    assert adapter.refused_after_abort == 1
    assert adapter.accepted == [[("z", 1)]]


def test_gateway_stop_aborts_waits_for_the_worker_and_closes_the_adapter(
    agentplug_host: PluginHost,
    cron: CronService,
    adapter: FakeWakeHost,
    projection: CronProjection,
) -> None:
    async def main() -> None:
        await cron.reconcile(jobs())
        adapter.hold, adapter.entered = asyncio.Event(), asyncio.Event()
        pending = asyncio.ensure_future(cron.changed({"id": "a"}, "updated"))
        await adapter.entered.wait()
        stop = await agentplug_host.dispatch("gateway_stop", {"reason": "shutdown"})
        assert [h.status for h in stop.handlers] == [HandlerStatus.OK]
        assert projection._worker is not None and projection._worker.done()
        await pending
        await cron.changed({"id": "a"}, "updated")  # after stop: nothing more projected

    asyncio.run(main())
    assert adapter.closed is True
    assert projection.lifecycle.aborted
    assert adapter.refused_after_abort == 1 and len(adapter.accepted) == 1


def test_a_backoff_sleep_is_cut_short_by_gateway_stop(
    agentplug_host: PluginHost, agentplug_load: PluginLoader
) -> None:
    adapter = FakeWakeHost(failures=100)
    made: list[CronProjection] = []
    # The real (1 s .. 30 s) abortable sleep.
    agentplug_load(lambda api: made.append(register_cron_projection(api, adapter)), PLUGIN_ID)
    cron = CronService(agentplug_host)

    async def main() -> None:
        reconciling = asyncio.ensure_future(cron.reconcile(jobs()))
        await asyncio.sleep(0.05)  # the worker now sleeps 1 s before its retry
        await asyncio.wait_for(agentplug_host.dispatch("gateway_stop", {}), timeout=10)
        await asyncio.wait_for(reconciling, timeout=10)

    asyncio.run(main())
    assert adapter.closed and adapter.accepted == []


# -- the installed entry point and the file adapter ------------------------------------


class TestTheInstalledEntryPointWithAPath:
    @pytest.fixture
    def target(self, tmp_path: Path) -> Path:
        return tmp_path / "wakes.json"

    @pytest.fixture
    def agentplug_config(self, target: Path) -> dict[str, Any]:
        """Operator config: project into the JSON file ``target``."""
        return {"plugins": {"entries": {PLUGIN_ID: {"config": {"path": str(target)}}}}}

    def test_the_installed_entry_point_projects_into_a_json_file(
        self, agentplug_host: PluginHost, agentplug_load: PluginLoader, target: Path
    ) -> None:
        record = agentplug_load(PLUGIN_ID)
        assert agentplug_host.plugins == [record]
        assert (record.plugin_id, record.bundled) == (PLUGIN_ID, False)
        assert sorted(record.hooks) == ["cron_changed", "cron_reconciled", "gateway_stop"]
        cron = CronService(agentplug_host)
        asyncio.run(cron.reconcile(jobs()))
        assert json.loads(target.read_text()) == {
            "wakes": [
                {"job_id": "c", "run_at_ms": 1000},
                {"job_id": "a", "run_at_ms": 2000},
                {"job_id": "b", "run_at_ms": 2000},
            ]
        }


def test_without_an_adapter_the_plugin_registers_nothing_and_says_why(
    agentplug_host: PluginHost, agentplug_load: PluginLoader, caplog: pytest.LogCaptureFixture
) -> None:
    record = agentplug_load(PLUGIN_ID)
    assert agentplug_host.plugins == [record]
    assert record.hooks == [] and "config.path" in caplog.text


def test_the_file_adapter_is_idempotent_and_refuses_aborted_snapshots(tmp_path: Path) -> None:
    adapter = JsonFileWakeHost(tmp_path / "w.json")
    wakes = [ExternalWake("a", 1)]

    async def main() -> None:
        await adapter.replace_all(wakes, signal=AbortController().signal)
        first = (tmp_path / "w.json").read_bytes()
        await adapter.replace_all(wakes, signal=AbortController().signal)
        assert (tmp_path / "w.json").read_bytes() == first
        with pytest.raises(AbortError):
            await adapter.replace_all([], signal=AbortSignal.aborted_with("stale"))
        await adapter.close()

    asyncio.run(main())
    assert adapter.read() == wakes
    assert [p.name for p in tmp_path.iterdir()] == ["w.json"]  # no temp file left behind
