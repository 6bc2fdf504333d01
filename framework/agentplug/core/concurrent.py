"""Observation hooks: every handler starts at once; each is awaited within its budget."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any

from agentplug_hookspecs import Context, Event, HookDecl
from agentplug_hookspecs._model import _HANDLER_CONTEXT

from agentplug.core.dispatch import (
    Handler,
    HandlerStatus,
    Tracker,
    _CoroutineType,
    _describe,
    _start_thread,
)
from agentplug.core.sequential import _finish

__all__ = ["run_concurrent"]

log = logging.getLogger("agentplug.dispatch")


async def run_concurrent(
    decl: HookDecl,
    plan: Sequence[Handler],
    event: Event,
    ctx: Context,
    tracker: Tracker,
) -> list[tuple[Handler, HandlerStatus, float, str | None]]:
    """Start every handler of an observation hook, then wait for each within its budget."""
    loop = asyncio.get_running_loop()
    clock = time.perf_counter
    slots: list[tuple[Handler, HandlerStatus, float, str | None] | None] = []
    waiting: dict[asyncio.Future[Any], tuple[int, Handler, float, float]] = {}
    var = _HANDLER_CONTEXT
    token = var.set(var.get())
    try:
        for handler in plan:
            if handler.gate is not None:
                slots.append((handler, HandlerStatus.BLOCKED_BY_GATE, 0.0, handler.gate))
                continue
            var.set(handler.context)
            started = clock()
            try:
                if handler.thread:
                    fut: asyncio.Future[Any] = _start_thread(handler, event, ctx)
                else:
                    value = handler.call(event, ctx)
                    if value is None or not (
                        type(value) is _CoroutineType or asyncio.iscoroutine(value)
                    ):
                        slots.append((handler, HandlerStatus.OK, clock() - started, None))
                        continue
                    try:
                        first = value.send(None)
                    except StopIteration:
                        slots.append((handler, HandlerStatus.OK, clock() - started, None))
                        continue
                    fut = loop.create_task(_finish(value, first))
            except (Exception, asyncio.CancelledError) as exc:
                error = _describe(exc, decl.name, handler.plugin_id)
                slots.append((handler, HandlerStatus.ERROR, clock() - started, error))
                log.warning("hook %s: plugin %s failed (%s)", decl.name, handler.plugin_id, error)
                continue
            deadline = (
                loop.time() + handler.timeout_s if handler.timeout_s is not None else float("inf")
            )
            waiting[fut] = (len(slots), handler, started, deadline)
            slots.append(None)
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
                failure = asyncio.CancelledError() if fut.cancelled() else fut.exception()
                if failure is None:
                    slots[slot] = (handler, HandlerStatus.OK, clock() - started, None)
                else:
                    reason = _describe(failure, decl.name, handler.plugin_id)
                    slots[slot] = (handler, HandlerStatus.ERROR, clock() - started, reason)
                    log.warning(
                        "hook %s: plugin %s failed (%s)", decl.name, handler.plugin_id, reason
                    )
            elif deadline <= now:
                del waiting[fut]
                tracker.track(fut, f"{handler.plugin_id}:{handler.hook}")
                error = f"timed out after {(handler.timeout_s or 0) * 1000:.0f} ms"
                slots[slot] = (handler, HandlerStatus.TIMEOUT, clock() - started, error)
                log.warning("hook %s: plugin %s %s", decl.name, handler.plugin_id, error)
    return [s for s in slots if s is not None]
