"""Observation hooks: every handler starts at once; each is awaited within its budget.

Handlers start in priority order inside :meth:`ConcurrentRun.chain`, a coroutine driven
inline: a handler that finishes without suspending costs no task and no timer. When one
suspends, the chain that was running it is handed to a task that finishes that handler
only (it is *detached*: ``generation`` moved on), and a fresh chain starts the next
handler at once. The detached tasks are then awaited, each within its handler's budget.
A plan of plain ``def`` handlers runs as the dispatcher's straight loop first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from typing import Any

from agentplug_hookspecs import Context, Event, HookDecl
from agentplug_hookspecs._model import HANDLER_CONTEXT

from agentplug.core.failures import describe_failure, passes_through
from agentplug.core.results import Handler, HandlerStatus, Record, Tracker
from agentplug.core.runs import CoroutineType, Preset, finish, start_thread

__all__ = ["ConcurrentRun", "run_concurrent"]

log = logging.getLogger("agentplug.dispatch")

_OK = HandlerStatus.OK


class ConcurrentRun:
    """State of one observation dispatch: one record slot per handler, filled in as each
    handler ends (by the chain that ran it, or by the driver when its budget ran out)."""

    __slots__ = (
        "closing",
        "ctx",
        "current",
        "decl",
        "event",
        "generation",
        "plan",
        "slots",
        "timing",
        "tracker",
    )

    def __init__(
        self,
        decl: HookDecl,
        plan: Sequence[Handler],
        event: Event,
        ctx: Context,
        tracker: Tracker,
        timing: bool,
    ) -> None:
        self.decl = decl
        self.plan = plan
        self.event = event
        self.ctx = ctx
        self.tracker = tracker
        self.timing = timing
        self.slots: list[Record | None] = [None] * len(plan)
        self.generation = 0
        self.current = 0
        self.closing = False

    async def chain(self, start: int, gen: int, preset: Preset | None = None) -> None:
        """Start handlers from ``start`` in order; a detached chain stops after its handler."""
        plan = self.plan
        slots = self.slots
        event = self.event
        ctx = self.ctx
        bind = HANDLER_CONTEXT.set
        clock = time.perf_counter
        coroutine = CoroutineType
        timing = self.timing
        last = clock()
        if preset is not None:  # handler ``start`` already ran in the straight loop
            value, exc, elapsed = preset
            last -= elapsed
            self.current = start
            if exc is not None:
                self._raised(start, exc, elapsed)
            elif type(value) is coroutine or asyncio.iscoroutine(value):
                await self._await(start, value, last)
            else:
                self._ended(start, elapsed)
            if gen != self.generation:
                return
            start += 1
            last = clock()
        for i in range(start, len(plan)):
            h = plan[i]
            if h.gate is not None:
                slots[i] = (h, HandlerStatus.BLOCKED_BY_GATE, 0.0, h.gate)
                continue
            self.current = i
            bind(h.context)
            try:
                if h.thread:
                    value = await start_thread(h, event, ctx)
                else:
                    value = h.function(event, ctx) if h.fast else h.call(event, ctx)
                    if value is not None and (
                        type(value) is coroutine or asyncio.iscoroutine(value)
                    ):
                        await value
            except BaseException as exc:
                now = clock()
                self._raised(i, exc, now - last)
            else:
                now = clock()
                elapsed = now - last
                if elapsed <= h.budget and slots[i] is None:
                    slots[i] = (h, _OK, elapsed, None) if timing else h.ok_record
                else:
                    self._ended(i, elapsed)
            if gen != self.generation:
                return  # detached: this chain only owed handler ``i``
            last = now

    async def _await(self, i: int, value: Any, started: float) -> None:
        try:
            await value
        except BaseException as exc:
            self._raised(i, exc, time.perf_counter() - started)
            return
        self._ended(i, time.perf_counter() - started)

    def _ended(self, i: int, elapsed: float) -> None:
        """Handler ``i`` returned after ``elapsed`` seconds (its slot may be taken already:
        the driver stopped waiting for it)."""
        if self.slots[i] is not None:
            return
        h = self.plan[i]
        if elapsed > h.budget:
            error = self.tracker.overran(h, elapsed)
            self.slots[i] = (h, HandlerStatus.TIMEOUT, elapsed if self.timing else 0.0, error)
            log.warning("hook %s: plugin %s failed (%s)", self.decl.name, h.plugin_id, error)
            return
        self.slots[i] = (h, _OK, elapsed, None) if self.timing else h.ok_record

    def _raised(self, i: int, exc: BaseException, elapsed: float) -> None:
        if passes_through(exc, self.closing):
            raise exc
        if self.slots[i] is not None:
            return
        h = self.plan[i]
        reason = describe_failure(exc, self.decl.name, h.plugin_id)
        self.slots[i] = (h, HandlerStatus.ERROR, elapsed if self.timing else 0.0, reason)
        log.warning("hook %s: plugin %s failed (%s)", self.decl.name, h.plugin_id, reason)


async def run_concurrent(
    decl: HookDecl,
    plan: Sequence[Handler],
    event: Event,
    ctx: Context,
    tracker: Tracker,
    timing: bool = False,
    *,
    at: int = 0,
    preset: Preset | None = None,
) -> list[Record]:
    """Start every handler of an observation hook, then wait for each within its budget.

    ``at`` and ``preset``: handlers before ``at`` already ran and returned ``None`` in
    time (the straight loop), and ``preset`` is what handler ``at`` did.
    """
    run = ConcurrentRun(decl, plan, event, ctx, tracker, timing)
    slots = run.slots
    for index in range(at):
        slots[index] = plan[index].ok_record
    loop = asyncio.get_running_loop()
    waiting: dict[asyncio.Future[Any], tuple[int, Handler, float, float]] = {}
    var = HANDLER_CONTEXT
    token = var.set(var.get())
    chain: Coroutine[Any, Any, None] = run.chain(at, 0, preset)
    try:
        while True:
            try:
                first = chain.send(None)
            except StopIteration:
                break
            # Handler ``run.current`` suspended: its chain finishes it alone, in a task.
            i = run.current
            handler = plan[i]
            run.generation += 1
            task = loop.create_task(finish(chain, first, run))
            now = loop.time()
            deadline = now + handler.timeout_s if handler.timeout_s is not None else float("inf")
            waiting[task] = (i, handler, time.perf_counter(), deadline)
            chain = run.chain(i + 1, run.generation)
    except BaseException:
        for fut, (_, handler, _, _) in waiting.items():
            tracker.track(fut, f"{handler.plugin_id}:{handler.hook}")
        raise
    finally:
        var.reset(token)

    while waiting:
        nearest = min(entry[3] for entry in waiting.values())
        budget = None if nearest == float("inf") else max(0.0, nearest - loop.time())
        try:
            done, _ = await asyncio.wait(waiting, timeout=budget)
        except asyncio.CancelledError:
            for fut, (_, handler, _, _) in waiting.items():
                tracker.track(fut, f"{handler.plugin_id}:{handler.hook}")
            raise
        now = loop.time()
        for fut in list(waiting):
            slot, handler, started, deadline = waiting[fut]
            if fut in done:
                del waiting[fut]
                if slots[slot] is None:  # the task ended without its chain's record
                    failure = asyncio.CancelledError() if fut.cancelled() else fut.exception()
                    reason = (
                        describe_failure(failure, decl.name, handler.plugin_id)
                        if failure is not None
                        else "ended unrecorded"
                    )
                    slots[slot] = (handler, HandlerStatus.ERROR, 0.0, reason)
                    log.warning(
                        "hook %s: plugin %s failed (%s)", decl.name, handler.plugin_id, reason
                    )
            elif deadline <= now:
                del waiting[fut]
                tracker.track(fut, f"{handler.plugin_id}:{handler.hook}")
                error = f"timed out after {(handler.timeout_s or 0) * 1000:.0f} ms"
                duration = time.perf_counter() - started if run.timing else 0.0
                slots[slot] = (handler, HandlerStatus.TIMEOUT, duration, error)
                log.warning("hook %s: plugin %s %s", decl.name, handler.plugin_id, error)
    return [s for s in slots if s is not None]
