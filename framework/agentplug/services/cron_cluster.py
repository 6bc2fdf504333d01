"""Cron across gateways: one leader at a time, and each tick of a job runs at most once.

Several gateway processes share one state store (a SQLite file on one machine, or
PostgreSQL). :class:`CronLease` elects the gateway that runs the scheduled jobs: a lease
record (``cron.lease`` namespace) naming its holder and the wall-clock time it expires,
read and written in one ``store.atomic`` block. The holder renews it on every poll; a
gateway that dies stops renewing, and another one takes the lease once it expired.

Every run of a job first claims its tick (``cron.ticks``, through ``put_if_absent``), so
even two gateways that both believe they lead (a stalled holder whose lease ran out)
never run one tick twice. A tick whose run was interrupted by a crash stays claimed and
is not run again: delivery is at most once per tick.

:class:`ClusterCron` runs jobs on that lease: ``add_job(job_id, every_ms, fn)``, then
``await cron.run()`` until :meth:`ClusterCron.stop`. It dispatches ``cron_changed``
(``started`` / ``finished``) around each run and ``cron_reconciled`` whenever the leader
it sees changes, with ``ctx.leader`` / ``ctx.is_leader`` naming it. Adding a job
dispatches ``cron_changed`` ``added`` (``updated`` when the id was there), removing one
``removed`` with its last snapshot, and a run that moves a job's next run time
``scheduled`` with the new ``next_run_at_ms`` (all post-commit: after the scheduler
holds the change).

Ticks come from wall-clock time (``time.time()``), so the gateways' clocks must agree to
well within ``lease_ms`` and a job's interval (NTP).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agentplug_hookspecs.lifecycle import CronJob, CronJobState

from agentplug.services.cron_lease import (
    LEASE_NAMESPACE,
    TICKS_NAMESPACE,
    CronLease,
    default_node_id,
    wall_ms,
)
from agentplug.services.lifecycle import CronService, Scheduler
from agentplug.services.signals import AbortController, AbortSignal
from agentplug.store.base import StateStore

if TYPE_CHECKING:
    from agentplug.core.host import PluginHost

__all__ = [
    "LEASE_NAMESPACE",
    "TICKS_NAMESPACE",
    "ClusterCron",
    "CronLease",
    "CronRun",
    "CronTick",
    "default_node_id",
    "wall_ms",
]

log = logging.getLogger("agentplug.cron")

_PRUNE_EVERY = 64  # claims between two sweeps of a job's old tick records


@dataclass(frozen=True)
class CronTick:
    """What a job function receives: which tick of which job runs, and where."""

    job_id: str
    """Id of the job."""
    tick: int
    """The tick number: the run due at ``start_ms + tick * every_ms``."""
    due_ms: int
    """When this tick was due (epoch milliseconds)."""
    node_id: str
    """The gateway running it (the lease holder)."""
    abort_signal: AbortSignal
    """Aborted when this gateway loses the lease or the runner stops."""


@dataclass(frozen=True)
class CronRun:
    """How one run ended (what :meth:`ClusterCron.tick_once` returns)."""

    job_id: str
    """Id of the job."""
    tick: int
    """The tick that ran."""
    status: str
    """``ok`` or ``error``."""
    error: str | None = None
    """``<ExceptionType>: <message>`` when the job raised."""


ChangeReason = Literal["added", "updated", "removed", "started", "finished", "scheduled"]

JobFn = Callable[[CronTick], Any]
"""A job: ``fn(tick)``, sync (run in a worker thread) or async."""


@dataclass
class _Job:
    id: str
    every_ms: int
    fn: JobFn
    start_ms: int
    end_ms: int | None
    catch_up_ms: int  # how late (beyond one poll) a tick may still run
    last_tick: int | None = None  # the highest tick this node tried to claim
    task: asyncio.Task[list[CronRun]] | None = None
    claims: int = 0
    runs: list[CronRun] = field(default_factory=list)


class ClusterCron:
    """Runs interval jobs on one gateway of a cluster: the holder of the cron lease.

    ``store`` is the gateway's state store; every gateway sharing it with the same
    ``name`` competes for one lease. ``poll_ms`` (default ``lease_ms / 4``) is how often
    the lease is renewed and due ticks are looked for; it must stay well below
    ``lease_ms``. ``cron`` is the :class:`~agentplug.services.lifecycle.CronService`
    that dispatches the hooks (a new one by default).

    Each poll: renew or take the lease; when the leader seen changes, dispatch
    ``cron_reconciled`` (``startup`` the first time, ``reload`` after) with
    ``ctx.get_cron()`` returning :attr:`scheduler`, ``ctx.leader`` the holder and
    ``ctx.is_leader``. On the leader, every job whose tick came due claims it
    (:meth:`CronLease.claim_tick`) and runs it between ``cron_changed`` ``started`` and
    ``finished``. A job that raises is recorded (``last_run_status="error"``,
    ``last_error``) and the loop goes on. When the store cannot be reached, the poll
    counts as "not leader": one log line, and no job runs without the lease.
    """

    def __init__(
        self,
        host: PluginHost,
        *,
        store: StateStore,
        node_id: str | None = None,
        lease_ms: int = 10_000,
        poll_ms: int | None = None,
        cron: CronService | None = None,
        name: str = "cron",
    ) -> None:
        self.host = host
        self.store: StateStore = store
        self.node_id = node_id or default_node_id()
        self.lease = CronLease(self.store, self.node_id, lease_ms=lease_ms, name=name)
        self.poll_ms = poll_ms if poll_ms is not None else max(1, lease_ms // 4)
        if self.poll_ms >= lease_ms:
            raise ValueError("poll_ms must be below lease_ms (the lease is renewed every poll)")
        self.cron = cron if cron is not None else CronService(host)
        self.scheduler = Scheduler()
        """The job snapshots (``ctx.get_cron()`` of ``cron_reconciled``)."""
        self._jobs: dict[str, _Job] = {}
        self._reported: tuple[str | None, bool] | None = None
        self._store_down = False
        self._stopping = asyncio.Event()
        self._runs = AbortController()
        self._changes: deque[tuple[CronJob, ChangeReason]] = deque()
        self._flushing = asyncio.Lock()
        self._flushes: set[asyncio.Task[int]] = set()

    # -- jobs -------------------------------------------------------------------------

    def add_job(
        self,
        job_id: str,
        every_ms: int,
        fn: JobFn,
        *,
        start_ms: int = 0,
        end_ms: int | None = None,
        catch_up_ms: int | None = None,
    ) -> CronJob:
        """Run ``fn(tick)`` every ``every_ms``; return the job's snapshot.

        Tick ``n`` is due at ``start_ms + n * every_ms`` (epoch milliseconds; the
        default ``0`` aligns ticks to the epoch so that every gateway computes the same
        ones), and only while it is before ``end_ms`` when that is given.

        A poll runs every tick that came due since the last one. A tick found later than
        ``catch_up_ms + poll_ms`` after it came due is skipped, not run late: the default
        ``catch_up_ms`` is the smaller of ``every_ms`` and ``lease_ms``, so the ticks a
        failover missed run once the new leader took the lease (up to one interval of
        them), and a gateway starting up does not run a tick that was due long ago.
        Every gateway must add the same jobs with the same arguments.
        """
        if every_ms <= 0:
            raise ValueError("every_ms must be positive")
        if ":" in job_id:
            raise ValueError("job ids may not contain ':'")
        if catch_up_ms is None:
            catch_up_ms = min(every_ms, self.lease.lease_ms)
        job = _Job(
            id=job_id,
            every_ms=every_ms,
            fn=fn,
            start_ms=start_ms,
            end_ms=end_ms,
            catch_up_ms=max(0, catch_up_ms),
        )
        reason: ChangeReason = "updated" if job_id in self._jobs else "added"
        self._jobs[job_id] = job
        state = CronJobState(next_run_at_ms=_next_run_ms(job, wall_ms()))
        snapshot = self.scheduler.put(
            CronJob(id=job_id, schedule=f"every {every_ms} ms", state=state)
        )
        self._announce(snapshot, reason)
        return snapshot

    def remove_job(self, job_id: str) -> CronJob | None:
        """Stop scheduling a job (a run in progress finishes); return its last snapshot."""
        self._jobs.pop(job_id, None)
        snapshot = self.scheduler.remove(job_id)
        if snapshot is not None:
            self._announce(snapshot, "removed")
        return snapshot

    def _announce(self, snapshot: CronJob, reason: ChangeReason) -> None:
        """Queue ``cron_changed`` for a change the scheduler now holds; dispatched at once
        when a loop runs, else by the next :meth:`poll` (or :meth:`flush_changes`)."""
        self._changes.append((snapshot, reason))
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        task = loop.create_task(self.flush_changes())
        self._flushes.add(task)  # referenced until it ends
        task.add_done_callback(self._flushes.discard)

    async def flush_changes(self) -> int:
        """Dispatch the queued ``added`` / ``updated`` / ``removed`` changes, in the order
        they happened; return how many."""
        sent = 0
        async with self._flushing:
            while self._changes:
                snapshot, reason = self._changes.popleft()
                await self._dispatch_change(snapshot, reason)
                sent += 1
        return sent

    def runs(self, job_id: str) -> list[CronRun]:
        """The runs of a job on this gateway, oldest first."""
        job = self._jobs.get(job_id)
        return list(job.runs) if job is not None else []

    @property
    def leader(self) -> str | None:
        """The lease holder as this gateway last saw it (``None``: none, or unknown)."""
        return self._reported[0] if self._reported is not None else None

    @property
    def is_leader(self) -> bool:
        """Whether this gateway held the lease at its last poll (and still does)."""
        return self.lease.holds()

    # -- the loop ---------------------------------------------------------------------

    async def poll(self) -> list[asyncio.Task[list[CronRun]]]:
        """One step: renew the lease, report a leader change, start the due runs.

        Returns the tasks of the runs it started (each runs one job's due ticks in
        order); :meth:`run` does not wait for them, so the lease keeps being renewed
        while a job runs.
        """
        await self.flush_changes()
        leading = await self._acquire()
        if leading:
            state: tuple[str | None, bool] = (self.node_id, True)
        elif self._store_down:
            # Unknown holder: step down if we led, otherwise keep what was reported.
            was = self._reported
            state = (None, False) if was is None or was[1] else was
        else:
            state = (self.lease.holder, False)
        if state != self._reported:
            await self._report(state)
        if not leading:
            return []
        now = wall_ms()
        started = []
        for job in list(self._jobs.values()):
            if job.task is not None and not job.task.done():
                continue  # one run of a job at a time; its missed ticks may catch up
            ticks = self._due(job, now)
            if ticks:
                job.task = asyncio.create_task(self._run_ticks(job, ticks))
                started.append(job.task)
        return started

    async def tick_once(self) -> list[CronRun]:
        """:meth:`poll` once and wait for the runs it started; return how they ended."""
        tasks = await self.poll()
        results = await asyncio.gather(*tasks) if tasks else []
        return [run for batch in results for run in batch]

    async def run(self) -> None:
        """Poll every ``poll_ms`` until :meth:`stop`; then wait for the runs in progress
        and release the lease so that another gateway takes over at once.

        After :meth:`stop` (even one called before ``run``), it returns at once."""
        try:
            while not self._stopping.is_set():
                await self.poll()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), self.poll_ms / 1000)
        finally:
            self._runs.abort("the cron runner stopped")
            await self._drain()
            await self._release()

    def stop(self) -> None:
        """Ask :meth:`run` to return after the runs in progress finished."""
        self._stopping.set()

    async def _drain(self) -> None:
        tasks = [j.task for j in self._jobs.values() if j.task is not None and not j.task.done()]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _release(self) -> None:
        try:
            await asyncio.to_thread(self.lease.release)
        except Exception as exc:  # StateStoreUnavailable, or SQLite's 'database is locked'
            log.warning("cron: could not release the lease (it expires on its own): %s", exc)

    async def _acquire(self) -> bool:
        try:
            held = await asyncio.to_thread(self.lease.acquire)
        except Exception as exc:  # StateStoreUnavailable, or SQLite's 'database is locked'
            if not self._store_down:
                log.warning("cron: state store unavailable, not leading until it answers: %s", exc)
            self._store_down = True
            return False
        if self._store_down:
            log.info("cron: state store reachable again")
        self._store_down = False
        return held

    async def _report(self, state: tuple[str | None, bool]) -> None:
        first = self._reported is None
        was_leading = self._reported is not None and self._reported[1]
        self._reported = state
        leader, leading = state
        if leading and not was_leading:
            for job in self._jobs.values():
                job.last_tick = None  # look at the whole catch-up window again
        if was_leading and not leading:
            self._runs.abort("this gateway lost the cron lease")
            self._runs = AbortController()
        log.info("cron: leader is %s (this gateway: %s)", leader or "unknown", self.node_id)
        await self.cron.reconcile(
            self.scheduler,
            "startup" if first else "reload",
            leader=leader,
            is_leader=leading,
        )

    def _due(self, job: _Job, now: int) -> list[int]:
        if now < job.start_ms:
            return []
        current = (now - job.start_ms) // job.every_ms
        if job.end_ms is not None:
            if job.end_ms <= job.start_ms:
                return []
            current = min(current, math.ceil((job.end_ms - job.start_ms) / job.every_ms) - 1)
        oldest_due = now - job.catch_up_ms - self.poll_ms
        low = max(0, -((job.start_ms - oldest_due) // job.every_ms))  # first due >= oldest
        if job.last_tick is not None:
            low = max(low, job.last_tick + 1)
        return list(range(low, current + 1))

    async def _run_ticks(self, job: _Job, ticks: list[int]) -> list[CronRun]:
        done: list[CronRun] = []
        for tick in ticks:
            if self._stopping.is_set() or job.id not in self._jobs:
                break
            try:
                claimed = await asyncio.to_thread(self.lease.claim_tick, job.id, tick)
            except Exception as exc:  # StateStoreUnavailable, or SQLite's 'database is locked'
                log.warning("cron: could not claim %s tick %d: %s", job.id, tick, exc)
                break
            if not claimed:
                if not self.lease.holds():
                    break  # not asked of the store: this tick is tried again next poll
                job.last_tick = tick
                continue  # another (earlier) leader has it
            job.last_tick = tick
            job.claims += 1
            done.append(await self._run_one(job, tick))
            if job.claims % _PRUNE_EVERY == 1:
                await self._prune(job, tick)
        return done

    async def _run_one(self, job: _Job, tick: int) -> CronRun:
        due_ms = job.start_ms + tick * job.every_ms
        info = CronTick(job.id, tick, due_ms, self.node_id, self._runs.signal)
        await self._changed(job, "started", None, None)
        status, error = "ok", None
        try:
            if inspect.iscoroutinefunction(job.fn):
                await job.fn(info)
            else:
                result = await asyncio.to_thread(job.fn, info)
                if inspect.isawaitable(result):
                    await _await(result)
        except Exception as exc:
            status, error = "error", f"{type(exc).__name__}: {exc}"
            log.warning("cron: job %s tick %d failed: %s", job.id, tick, error)
        try:
            await asyncio.to_thread(self.lease.finish_tick, job.id, tick, status, error)
        except Exception as exc:  # StateStoreUnavailable, or SQLite's 'database is locked'
            log.warning("cron: could not record %s tick %d: %s", job.id, tick, exc)
        await self._changed(job, "finished", status, error)
        run = CronRun(job.id, tick, status, error)
        job.runs.append(run)
        del job.runs[:-100]  # the last 100 are enough to look at
        return run

    async def _changed(
        self, job: _Job, reason: ChangeReason, status: str | None, error: str | None
    ) -> None:
        snapshot = self.scheduler.get(job.id)
        if snapshot is None:
            return
        before = snapshot.state.next_run_at_ms
        next_ms = _next_run_ms(job, wall_ms())
        update: dict[str, Any] = {"next_run_at_ms": next_ms}
        if status is not None:
            update |= {"last_run_status": status, "last_error": error}
        state = CronJobState.model_validate(snapshot.state.model_dump() | update)
        snapshot = self.scheduler.put(snapshot.model_copy(update={"state": state}))
        await self._dispatch_change(snapshot, reason)
        if next_ms != before:  # the committed next run moved: a hint to re-read it
            await self._dispatch_change(snapshot, "scheduled")

    async def _dispatch_change(self, snapshot: CronJob, reason: ChangeReason) -> None:
        try:
            await self.cron.changed(snapshot, reason)
        except Exception as exc:  # an observe hook never stops the scheduler
            log.warning("cron: cron_changed dispatch failed: %s", type(exc).__name__)

    async def _prune(self, job: _Job, tick: int) -> None:
        # Keep every record a leader may still look at: the catch-up window, plus the
        # ticks of a lease period on either side (clock differences between gateways).
        span = job.catch_up_ms + self.poll_ms + 2 * self.lease.lease_ms
        keep = span // job.every_ms + 2
        with contextlib.suppress(Exception):  # the next sweep removes them
            await asyncio.to_thread(self.lease.prune, job.id, tick - keep)


def _next_run_ms(job: _Job, now: int) -> int | None:
    """When ``job`` runs next after ``now`` (``None``: past its ``end_ms``)."""
    if now < job.start_ms:
        return job.start_ms
    next_ms = job.start_ms + ((now - job.start_ms) // job.every_ms + 1) * job.every_ms
    if job.end_ms is not None and next_ms >= job.end_ms:
        return None
    return next_ms


async def _await(value: Awaitable[Any]) -> Any:
    return await value
