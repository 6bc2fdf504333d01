"""Observation hooks: every handler starts at once; each is awaited within its budget.

Handlers start in priority order inside the general call loop
(:meth:`~agentplug.core.runs.Run.chain`), a coroutine driven inline: a handler that
finishes without suspending costs no task and no timer. When one suspends, the chain
that was running it is handed to a task that finishes that handler only (it is
*detached*: ``generation`` moved on), and a fresh chain starts the next handler at once.
The detached tasks are then awaited, each within its handler's budget. A plan of plain
``def`` handlers runs on the fast path (:mod:`agentplug.core.fastpath`) first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from typing import Any

from agentplug_hookspecs import Context, Event
from agentplug_hookspecs._model import HANDLER_CONTEXT

from agentplug.core.failures import describe_failure, passes_through
from agentplug.core.fastpath import Preset
from agentplug.core.plans import HookPlan
from agentplug.core.results import Handler, HandlerStatus, Record, Tracker
from agentplug.core.runs import Run

__all__ = ["ConcurrentRun", "run_concurrent"]

log = logging.getLogger("agentplug.dispatch")

_OK = HandlerStatus.OK


class ConcurrentRun(Run):
    """State of one observation dispatch: the general loop starts every handler in order;
    a detached chain records the one handler it finishes, and the driver records a handler
    whose budget ran out first (a slot already filled is left alone)."""

    __slots__ = ()

    def ended(self, i: int, gen: int, value: Any, elapsed: float) -> int | None:
        """Handler ``i`` returned after ``elapsed`` seconds (what it returned is ignored;
        its slot may be taken already: the driver stopped waiting for it)."""
        if self.records[i] is None:
            h = self.plan[i]
            if elapsed > h.budget:
                error = self.tracker.overran(h, elapsed)
                duration = elapsed if self.timing else 0.0
                self.records[i] = (h, HandlerStatus.TIMEOUT, duration, error)
                log.warning("hook %s: plugin %s failed (%s)", self.decl.name, h.plugin_id, error)
            else:
                self.records[i] = (h, _OK, elapsed, None) if self.timing else h.ok_record
        return None if gen == self.generation else -1  # detached: it owed handler ``i`` only

    def raised(self, i: int, gen: int, exc: BaseException, elapsed: float) -> int | None:
        """Handler ``i`` raised: record the failure (unless its slot is taken) and go on."""
        if passes_through(exc, self.closing):
            raise exc
        if self.records[i] is None:
            h = self.plan[i]
            reason = describe_failure(exc, self.decl.name, h.plugin_id)
            duration = elapsed if self.timing else 0.0
            self.records[i] = (h, HandlerStatus.ERROR, duration, reason)
            log.warning("hook %s: plugin %s failed (%s)", self.decl.name, h.plugin_id, reason)
        return None if gen == self.generation else -1


async def run_concurrent(
    hook: HookPlan,
    event: Event,
    ctx: Context,
    tracker: Tracker,
    timing: bool = False,
    *,
    done: Sequence[Record] = (),
    preset: Preset | None = None,
) -> list[Record]:
    """Start every handler of an observation hook, then wait for each within its budget.

    ``done`` and ``preset``: the first handlers already ran and returned ``None`` in time
    (the fast path; these are their records), and ``preset`` is what the next one did.
    """
    run = ConcurrentRun(hook, event, ctx, tracker, timing, done)
    decl = hook.decl
    plan = hook.handlers
    slots = run.records
    loop = asyncio.get_running_loop()
    waiting: dict[asyncio.Future[Any], tuple[int, Handler, float, float]] = {}
    var = HANDLER_CONTEXT
    token = var.set(var.get())
    start = len(done)
    chain: Coroutine[Any, Any, int] = run.chain(start, 0, preset)
    try:
        while True:
            try:
                first = chain.send(None)
            except StopIteration:
                break
            # A handler suspended: its chain finishes it alone, in a task.
            i = run.suspended(start)
            handler = plan[i]
            task = run.detach(chain, first)
            now = loop.time()
            deadline = now + handler.timeout_s if handler.timeout_s is not None else float("inf")
            waiting[task] = (i, handler, time.perf_counter(), deadline)
            start = i + 1
            chain = run.chain(start, run.generation)
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
            ended, _ = await asyncio.wait(waiting, timeout=budget)
        except asyncio.CancelledError:
            for fut, (_, handler, _, _) in waiting.items():
                tracker.track(fut, f"{handler.plugin_id}:{handler.hook}")
            raise
        now = loop.time()
        for fut in list(waiting):
            slot, handler, started, deadline = waiting[fut]
            if fut in ended:
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
    return slots  # every slot is filled: by its chain, or here when its budget ran out
