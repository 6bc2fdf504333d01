"""Host lifecycle services: a bounded shutdown finalizer and the cron snapshot owner.

:class:`ShutdownFinalizer` turns SIGTERM/SIGINT into ``session_end`` (reason
``shutdown``; ``restart`` through ``finalize("restart")``) for every active session,
then ``gateway_stop``, all within ``timeout_s``: the runtime stops waiting for a hung
handler at the deadline. A plugin that blocks the event loop itself (a synchronous
infinite loop) cannot be interrupted from Python code, so after a signal a watchdog
thread ends the process ``grace_s`` after the deadline if it is still alive.

:class:`CronService` owns scheduler snapshots: each :meth:`CronService.reconcile`
aborts the previous snapshot's :class:`~agentplug.services.signals.AbortSignal` before it
dispatches ``cron_reconciled`` with ``ctx.get_cron()`` returning exactly that scheduler.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from types import FrameType
from typing import TYPE_CHECKING, Any, Literal

from agentplug_hookspecs.lifecycle import CronContext, CronJob
from pydantic import BaseModel, Field

from agentplug.core.results import DispatchResult
from agentplug.services.signals import AbortController, AbortSignal

if TYPE_CHECKING:
    from agentplug.core.host import HookHost as PluginHost
    from agentplug.services.sessions import SessionServices

__all__ = [
    "CronService",
    "FinalizeReport",
    "Scheduler",
    "ShutdownFinalizer",
]

log = logging.getLogger("agentplug.lifecycle")

FinalizeReason = Literal["shutdown", "restart"]


class FinalizeReport(BaseModel):
    """What :meth:`ShutdownFinalizer.finalize` did."""

    reason: FinalizeReason
    sessions: list[str] = Field(default_factory=list)
    timed_out: bool = False
    """``True`` when the deadline cut a phase short."""
    pending: list[str] = Field(default_factory=list)
    """``plugin_id:hook`` labels of handlers still running when finalizing ended."""
    duration_ms: float = 0.0


class ShutdownFinalizer:
    """Bounded ``session_end``/``gateway_stop`` on SIGTERM/SIGINT (or on demand).

    ``active_sessions`` returns the session keys open at that moment. ``timeout_s``
    (default: ``runtime.shutdown_timeout_ms``) bounds the whole finalization. After a
    signal, ``await finalizer.wait()`` returns the report; the host then exits. A second
    signal while finalizing, or a process still alive ``grace_s`` after the deadline,
    ends the process at once with ``128 + signum``.
    """

    def __init__(
        self,
        host: PluginHost,
        active_sessions: Callable[[], Iterable[str]],
        timeout_s: float | None = None,
        *,
        cron: CronService | None = None,
        sessions: SessionServices | None = None,
        grace_s: float = 2.0,
        hard_exit: bool = True,
    ) -> None:
        self.host = host
        self.sessions = sessions
        """The gateway's session services (a restart tells their cleanup callbacks)."""
        self.active_sessions = active_sessions
        self.timeout_s = (
            timeout_s if timeout_s is not None else host.config.runtime.shutdown_timeout_ms / 1000
        )
        self.cron = cron
        self.grace_s = grace_s
        self.hard_exit = hard_exit
        self.report: FinalizeReport | None = None
        self.signum: int | None = None
        """The signal that started finalizing (``None`` when called directly)."""
        self._task: asyncio.Task[FinalizeReport] | None = None
        self._done = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: dict[int, Any] = {}
        self._installed: list[int] = []

    # -- signal wiring ----------------------------------------------------------------

    def install(
        self,
        loop: asyncio.AbstractEventLoop | None = None,
        signals: Iterable[int] = (signal.SIGTERM, signal.SIGINT),
    ) -> None:
        """Handle ``signals``: through ``loop.add_signal_handler`` when a loop runs.

        Without a running loop, a plain ``signal.signal`` handler runs the finalizer on
        a fresh loop and then raises ``SystemExit(128 + signum)``.
        """
        if loop is None:
            with contextlib.suppress(RuntimeError):
                loop = asyncio.get_running_loop()
        self._loop = loop
        for signum in signals:
            if loop is not None:
                try:
                    loop.add_signal_handler(signum, self._on_loop_signal, signum)
                    self._installed.append(signum)
                    continue
                except (NotImplementedError, RuntimeError, ValueError):  # Windows, non-main thread
                    pass
            self._previous[signum] = signal.signal(signum, self._on_sync_signal)
            self._installed.append(signum)

    def uninstall(self) -> None:
        """Restore the previous signal handling."""
        for signum in self._installed:
            if signum in self._previous:
                signal.signal(signum, self._previous.pop(signum))
            elif self._loop is not None:
                with contextlib.suppress(Exception):
                    self._loop.remove_signal_handler(signum)
        self._installed.clear()

    def _on_loop_signal(self, signum: int) -> None:
        if self._task is not None:
            log.warning("second signal %d while finalizing: exiting now", signum)
            self._exit(128 + signum)
            return
        self.signum = signum
        self._arm_watchdog(128 + signum)
        log.info("signal %d: finalizing active sessions and plugin services", signum)
        self._start("shutdown")

    def _on_sync_signal(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            self._exit(128 + signum)
        self.signum = signum
        self._arm_watchdog(128 + signum)
        asyncio.run(self.finalize("shutdown"))
        raise SystemExit(128 + signum)

    def _arm_watchdog(self, code: int) -> None:
        if not self.hard_exit:
            return
        deadline = self.timeout_s + self.grace_s

        def watch() -> None:
            if not self._done.wait(deadline):
                log.error(
                    "shutdown finalizer: still running %.1f s after the signal; exiting now",
                    deadline,
                )
                self._exit(code)

        threading.Thread(target=watch, name="agentplug-shutdown-watchdog", daemon=True).start()

    @staticmethod
    def _exit(code: int) -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        logging.shutdown()
        os._exit(code)

    # -- finalizing -------------------------------------------------------------------

    def _start(self, reason: FinalizeReason) -> asyncio.Task[FinalizeReport]:
        if self._task is None:
            loop = self._loop or asyncio.get_running_loop()
            self._task = loop.create_task(self.finalize(reason))
        return self._task

    async def wait(self) -> FinalizeReport:
        """Wait for a signal and for the finalizer it started; return the report."""
        while self._task is None:
            await asyncio.sleep(0.05)
        return await self._task

    @property
    def finished(self) -> bool:
        """``True`` once a finalization completed (or gave up at its deadline)."""
        return self._done.is_set()

    async def finalize(self, reason: FinalizeReason = "shutdown") -> FinalizeReport:
        """``session_end`` for each active session, then ``gateway_stop``; bounded.

        The session phase may use the budget up to what is reserved for
        ``gateway_stop`` (half of it); ``gateway_stop`` gets what is left. Handlers
        still running at the deadline are reported, not cancelled.
        """
        started = time.monotonic()
        deadline = started + self.timeout_s
        timed_out = False
        try:
            sessions = [str(s) for s in self.active_sessions()]
        except Exception as exc:
            log.warning("shutdown finalizer: active_sessions() failed: %s", type(exc).__name__)
            sessions = []
        if self.cron is not None:
            self.cron.shutdown()
        if reason == "restart" and self.sessions is not None:
            self.sessions.restart()
        hooks = self.host.hooks
        ends = [
            hooks.session_end({"session_key": key, "reason": reason}, {"session_key": key})
            for key in sessions
        ]
        if ends:
            reserve = self.timeout_s / 2
            timed_out |= not await _bounded(ends, deadline - reserve)
        stop = hooks.gateway_stop({"reason": reason}, {"reason": reason})
        timed_out |= not await _bounded([stop], deadline)
        pending = self.host.tracker.pending
        report = FinalizeReport(
            reason=reason,
            sessions=sessions,
            timed_out=timed_out,
            pending=pending,
            duration_ms=round((time.monotonic() - started) * 1000, 3),
        )
        self.report = report
        self._done.set()
        if pending or timed_out:
            log.warning(
                "shutdown finalizer: %d handler(s) still running at the deadline: %s",
                len(pending),
                ", ".join(pending) or "(dispatch cut short)",
            )
        return report


async def _bounded(awaitables: list[Any], deadline: float) -> bool:
    """Run ``awaitables`` concurrently until ``deadline``; ``True`` when all finished."""
    loop = asyncio.get_running_loop()
    tasks = [loop.create_task(a) for a in awaitables]
    budget = max(0.0, deadline - time.monotonic())
    done, pending = await asyncio.wait(tasks, timeout=budget)
    for task in done:
        if task.exception() is not None:
            log.warning(
                "shutdown finalizer: a dispatch failed: %s", type(task.exception()).__name__
            )
    # Not cancelled (the runtime never cancels handlers); the process is ending anyway.
    return not pending


# -- cron ------------------------------------------------------------------------------


class Scheduler:
    """A tiny in-memory scheduler: enough for tests, demos and the cron hooks.

    ``list(include_disabled=...)`` returns :class:`CronJob` snapshots, the interface an
    external cron projection reads (the seed's ``CronReader``).
    """

    def __init__(self, jobs: Iterable[CronJob | Mapping[str, Any]] = (), *, enabled: bool = True):
        self.enabled = enabled
        self._jobs: dict[str, CronJob] = {}
        for job in jobs:
            self.put(job)

    def put(self, job: CronJob | Mapping[str, Any]) -> CronJob:
        """Add or replace a job; return its snapshot."""
        snapshot = job if isinstance(job, CronJob) else CronJob.model_validate(job)
        self._jobs[snapshot.id] = snapshot
        return snapshot

    def remove(self, job_id: str) -> CronJob | None:
        """Remove a job; return its last snapshot (``None`` when unknown)."""
        return self._jobs.pop(job_id, None)

    def get(self, job_id: str) -> CronJob | None:
        """One job's snapshot."""
        return self._jobs.get(job_id)

    def schedule(self, job_id: str, next_run_at_ms: int | None) -> CronJob:
        """Change a job's next run; return the new snapshot."""
        job = self._jobs[job_id]
        state = job.state.model_copy(update={"next_run_at_ms": next_run_at_ms})
        updated = job.model_copy(update={"state": state})
        self._jobs[job_id] = updated
        return updated

    def list(self, include_disabled: bool = False) -> list[CronJob]:
        """Job snapshots sorted by id (disabled ones only with ``include_disabled``)."""
        jobs = sorted(self._jobs.values(), key=lambda j: j.id)
        return jobs if include_disabled else [j for j in jobs if j.enabled]


class CronService:
    """Owns scheduler snapshots and dispatches the cron hooks.

    ``reconcile`` adopts a scheduler: it aborts the previous snapshot's signal *first*
    (so nothing keeps accepting the old snapshot), then dispatches ``cron_reconciled``
    whose ``ctx.get_cron()`` returns that scheduler and ``ctx.abort_signal`` its new
    signal. ``changed`` dispatches ``cron_changed`` (a hint to re-read; its context has
    no scheduler to adopt). ``shutdown`` aborts the current signal.
    """

    def __init__(self, host: PluginHost) -> None:
        self.host = host
        self._controller: AbortController | None = None
        self._scheduler: Any = None
        self.generation = 0
        """How many schedulers were adopted."""
        self.leader: str | None = None
        """The gateway holding the cron lease, as last reconciled (``None``: no lease)."""
        self.is_leader = True
        """Whether this gateway runs the jobs, as last reconciled."""

    @property
    def scheduler(self) -> Any:
        """The current scheduler (``None`` before the first reconcile)."""
        return self._scheduler

    @property
    def signal(self) -> AbortSignal | None:
        """The current snapshot's abort signal."""
        return self._controller.signal if self._controller is not None else None

    def prepare(self, reason: str = "superseded") -> AbortController:
        """A newer scheduler is being prepared: abort the current snapshot's signal."""
        if self._controller is not None:
            self._controller.abort(reason)
        self._controller = AbortController()
        return self._controller

    async def reconcile(
        self,
        scheduler: Any,
        reason: Literal["startup", "reload"] = "startup",
        *,
        enabled: bool | None = None,
        leader: str | None = None,
        is_leader: bool = True,
    ) -> DispatchResult[Any]:
        """Adopt ``scheduler`` and dispatch ``cron_reconciled`` for it.

        ``leader`` and ``is_leader`` (``ctx.leader``, ``ctx.is_leader``) report which
        gateway holds the cron lease when several share a store (see
        :class:`~agentplug.services.cron_cluster.ClusterCron`); later ``cron_changed``
        contexts carry the same values.
        """
        controller = self.prepare("superseded by a newer scheduler")
        self._scheduler = scheduler
        self.generation += 1
        self.leader, self.is_leader = leader, is_leader
        if enabled is None:
            enabled = bool(getattr(scheduler, "enabled", True))
        ctx = CronContext(
            get_cron=lambda: scheduler,
            abort_signal=controller.signal,
            leader=leader,
            is_leader=is_leader,
        )
        return await self.host.hooks.cron_reconciled({"reason": reason, "enabled": enabled}, ctx)

    async def changed(
        self,
        job: CronJob | Mapping[str, Any],
        reason: Literal["added", "updated", "removed", "started", "finished", "scheduled"],
        delivery_status: Literal[
            "not-requested", "delivered", "not-delivered", "unknown"
        ] = "unknown",
        next_run_at_ms: int | None = None,
    ) -> DispatchResult[Any]:
        """Dispatch ``cron_changed`` (post-commit) with a job snapshot."""
        snapshot = job if isinstance(job, CronJob) else CronJob.model_validate(job)
        if reason == "scheduled" and next_run_at_ms is None:
            next_run_at_ms = snapshot.state.next_run_at_ms
        ctx = CronContext(abort_signal=self.signal, leader=self.leader, is_leader=self.is_leader)
        return await self.host.hooks.cron_changed(
            {
                "reason": reason,
                "job": snapshot,
                "delivery_status": delivery_status,
                "next_run_at_ms": next_run_at_ms,
            },
            ctx,
        )

    def shutdown(self, reason: str = "shutdown") -> None:
        """Shutdown starts: abort the current snapshot's signal."""
        if self._controller is not None:
            self._controller.abort(reason)
