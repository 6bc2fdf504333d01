"""Bounded shutdown finalizer (real SIGTERM to a real host process) and CronService."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from agentplug import PluginApi, PluginHost
from agentplug.services.lifecycle import CronService, Scheduler, ShutdownFinalizer
from agentplug.services.signals import AbortSignal

HOST_SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys, time
    from agentplug import PluginHost
    from agentplug.services.lifecycle import ShutdownFinalizer

    out, mode = sys.argv[1], sys.argv[2]

    def note(**record):
        with open(out, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(record) + "\\n")

    def good(api):
        async def session_end(event, ctx):
            note(plugin="good", hook="session_end", session=event.session_key,
                 reason=event.reason)

        def gateway_stop(event):
            note(plugin="good", hook="gateway_stop", reason=event.reason)

        api.on("session_end", session_end, priority=10)
        api.on("gateway_stop", gateway_stop)

    def hung(api):
        async def hang_async(event):
            await asyncio.sleep(3600)

        def hang_blocking(event):
            time.sleep(3600)  # blocks the event loop itself

        api.on("session_end", hang_async if mode == "async" else hang_blocking)

    async def main():
        host = PluginHost()
        host.register(good, "good")
        host.register(hung, "hung")
        finalizer = ShutdownFinalizer(host, lambda: ["s1", "s2"], timeout_s=1.0, grace_s=1.0)
        finalizer.install()
        print("READY", flush=True)
        report = await finalizer.wait()
        note(hook="report", **report.model_dump())

    asyncio.run(main())
    """
)

# Only a hang guard (the plugin hangs for an hour): the tests assert what the finalizer
# reports and how the process ended, never how long it took.
HANG_GUARD_S = 300.0


def run_host_and_terminate(tmp_path: Path, mode: str) -> tuple[int, list[dict[str, Any]]]:
    script = tmp_path / "host.py"
    script.write_text(HOST_SCRIPT, encoding="utf-8")
    out = tmp_path / "events.jsonl"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(out), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "READY"
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(timeout=HANG_GUARD_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    records = [json.loads(line) for line in out.read_text().splitlines()] if out.exists() else []
    return code, records


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_with_a_hung_async_session_end_still_exits_within_the_bound(
    tmp_path: Path,
) -> None:
    code, records = run_host_and_terminate(tmp_path, "async")
    assert code == 0  # the hung handler was abandoned: the host returned normally
    ends = [r for r in records if r.get("plugin") == "good" and r["hook"] == "session_end"]
    assert sorted((r["session"], r["reason"]) for r in ends) == [
        ("s1", "shutdown"),
        ("s2", "shutdown"),
    ]
    assert {"plugin": "good", "hook": "gateway_stop", "reason": "shutdown"} in records
    [report] = [r for r in records if r["hook"] == "report"]
    assert report["reason"] == "shutdown" and report["timed_out"] is True


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_with_a_plugin_blocking_the_event_loop_still_exits_within_the_bound(
    tmp_path: Path,
) -> None:
    code, records = run_host_and_terminate(tmp_path, "blocking")
    assert code == 128 + signal.SIGTERM  # the watchdog ended the process
    assert {"plugin": "good", "hook": "session_end", "session": "s1", "reason": "shutdown"} in (
        records
    )


def test_finalize_restart_ends_sessions_with_restart_and_keeps_session_state() -> None:
    ended: list[tuple[str, str]] = []
    cleanups: list[str] = []

    def plugin(api: PluginApi) -> None:
        api.on("session_end", lambda event: ended.append((event.session_key, event.reason)))
        api.session.state.register_session_extension("x", default={"n": 0})
        api.session.on_cleanup(lambda reason: cleanups.append(reason))

    host = PluginHost()
    host.register(plugin, "memory")
    host.gateway.sessions.patch("s1", "memory", "x", {"n": 1})
    cron = CronService(host)
    asyncio.run(cron.reconcile(Scheduler()))
    first_signal = cron.signal
    finalizer = ShutdownFinalizer(
        host, lambda: ["s1"], timeout_s=5, cron=cron, sessions=host.gateway.sessions
    )
    report = asyncio.run(finalizer.finalize("restart"))
    assert ended == [("s1", "restart")] and cleanups == ["restart"]
    assert report.reason == "restart" and report.timed_out is False and report.sessions == ["s1"]
    assert host.gateway.sessions.session_row("s1")["plugin_extensions"]["memory"]["x"] == {"n": 1}
    assert first_signal is not None and first_signal.aborted  # shutdown aborts cron too


def test_a_failing_active_sessions_callback_still_stops_the_gateway() -> None:
    stopped: list[str] = []

    def plugin(api: PluginApi) -> None:
        api.on("gateway_stop", lambda event: stopped.append(event.reason))

    def broken() -> list[str]:
        raise RuntimeError("session registry gone")

    host = PluginHost()
    host.register(plugin, "svc")
    report = asyncio.run(ShutdownFinalizer(host, broken, timeout_s=5).finalize())
    assert stopped == ["shutdown"] and report.sessions == []


def test_the_deprecated_deactivate_alias_runs_at_shutdown() -> None:
    stopped: list[str] = []
    host = PluginHost()
    with pytest.warns(DeprecationWarning):
        host.register(
            lambda api: api.on("deactivate", lambda: stopped.append("deactivate")), "legacy"
        )
    asyncio.run(ShutdownFinalizer(host, list, timeout_s=5).finalize())
    assert stopped == ["deactivate"]


# -- CronService -----------------------------------------------------------------------


class CronSpy:
    def __init__(self) -> None:
        self.reconciled: list[tuple[Any, Any, AbortSignal, bool]] = []
        self.changed: list[Any] = []

    def register(self, api: PluginApi) -> None:
        api.on("cron_reconciled", self.on_reconciled)
        api.on("cron_changed", self.on_changed)

    def on_reconciled(self, event: Any, ctx: Any) -> None:
        self.reconciled.append((event, ctx.get_cron, ctx.abort_signal, ctx.abort_signal.aborted))

    def on_changed(self, event: Any, ctx: Any) -> None:
        self.changed.append((event, ctx))


def cron_host() -> tuple[CronService, CronSpy]:
    spy = CronSpy()
    host = PluginHost()
    host.register(spy, "spy")
    return CronService(host), spy


def test_reconcile_hands_out_that_scheduler_and_a_live_signal() -> None:
    cron, spy = cron_host()
    scheduler = Scheduler([{"id": "a", "state": {"next_run_at_ms": 5}}])
    asyncio.run(cron.reconcile(scheduler, "startup"))
    [(event, get_cron, signal_, aborted_then)] = spy.reconciled
    assert event.reason == "startup" and event.enabled is True
    assert get_cron() is scheduler
    assert aborted_then is False and signal_ is cron.signal


def test_a_newer_scheduler_aborts_the_previous_snapshot_first() -> None:
    cron, spy = cron_host()
    old, new = Scheduler(), Scheduler(enabled=False)
    asyncio.run(cron.reconcile(old, "startup"))
    asyncio.run(cron.reconcile(new, "reload"))
    (_, old_get, old_signal, _), (event, new_get, new_signal, _) = spy.reconciled
    assert old_signal.aborted and not new_signal.aborted
    assert old_get() is old and new_get() is new  # a later reload does not redirect it
    assert event.reason == "reload" and event.enabled is False
    assert cron.generation == 2


def test_cron_changed_carries_the_snapshot_but_no_scheduler_to_adopt() -> None:
    cron, spy = cron_host()
    scheduler = Scheduler([{"id": "a"}])
    asyncio.run(cron.reconcile(scheduler))
    job = scheduler.schedule("a", 1234)
    asyncio.run(cron.changed(job, "scheduled", "not-requested"))
    [(event, ctx)] = spy.changed
    assert event.reason == "scheduled" and event.next_run_at_ms == 1234
    assert event.job.id == "a" and event.job.state.next_run_at_ms == 1234
    assert event.delivery_status == "not-requested"
    assert ctx.get_cron is None and ctx.abort_signal is cron.signal


def test_shutdown_aborts_the_current_signal() -> None:
    cron, _ = cron_host()
    asyncio.run(cron.reconcile(Scheduler()))
    cron.shutdown()
    assert cron.signal is not None and cron.signal.aborted
    assert cron.signal.reason == "shutdown"


def test_the_scheduler_lists_disabled_jobs_only_on_request() -> None:
    scheduler = Scheduler([{"id": "b", "enabled": False}, {"id": "a"}])
    assert [j.id for j in scheduler.list()] == ["a"]
    assert [j.id for j in scheduler.list(include_disabled=True)] == ["a", "b"]
    assert scheduler.remove("a") is not None and scheduler.get("a") is None
