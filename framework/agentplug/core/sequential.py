"""Sequential hooks: handlers run one after another and fold into a reducer.

A handler that finishes without suspending is driven inline with ``coro.send(None)``
(no task, no timer); only a handler that really suspends gets a task and its time
budget. ``run_sync`` is the synchronous pipeline of ``tool_result_persist`` and
``before_message_write``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Generator, Sequence
from typing import Any

from agentplug_hookspecs import Context, FailurePolicy, HookDecl
from agentplug_hookspecs._model import _HANDLER_CONTEXT
from pydantic import ValidationError

from agentplug.core.dispatch import (
    Handler,
    HandlerStatus,
    Tracker,
    _cancelled_from_outside,
    _CoroutineType,
    _describe,
    _first_error,
    _skip_rest,
    _start_thread,
)
from agentplug.core.reducers import Reducer

__all__ = ["SequentialRun", "run_sequential", "run_sync"]

log = logging.getLogger("agentplug.dispatch")

_OK = HandlerStatus.OK
_ERROR = HandlerStatus.ERROR
_TIMEOUT = HandlerStatus.TIMEOUT
_GATED = HandlerStatus.BLOCKED_BY_GATE


class _Resume:
    """Awaitable continuing a coroutine whose first step already ran inline."""

    __slots__ = ("coro", "first")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any) -> None:
        self.coro = coro
        self.first = first

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, pending = self.coro, self.first
        while True:
            try:
                yield pending
            except BaseException as exc:  # forwarded into the coroutine
                try:
                    pending = coro.throw(exc)
                except StopIteration as stop:
                    return stop.value
                continue
            # asyncio resumes a suspended coroutine with send(None); do the same.
            try:
                pending = coro.send(None)
            except StopIteration as stop:
                return stop.value


async def _finish(coro: Coroutine[Any, Any, Any], first: Any) -> Any:
    return await _Resume(coro, first)


class SequentialRun:
    """State of one sequential dispatch.

    The handlers run inside :meth:`chain`, a coroutine the dispatcher drives with one
    ``send(None)``: when every handler finishes without suspending, the whole chain
    completes in that single step (one ``StopIteration`` per dispatch, no task, no
    timer). When a handler suspends, the dispatcher takes over: the chain continues in a
    task that finishes right after that handler, awaited with the handler's budget. On a
    timeout the chain is abandoned (``generation`` moves on, so whatever the stuck
    handler returns later is ignored) and a fresh chain starts at the next handler.
    """

    __slots__ = (
        "ctx",
        "decl",
        "first",
        "generation",
        "next_start",
        "pending",
        "plan",
        "records",
        "reducer",
        "slow",
        "started",
        "timing",
        "token",
    )

    pending: Coroutine[Any, Any, int] | None

    def __init__(
        self, decl: HookDecl, plan: Sequence[Handler], reducer: Reducer, ctx: Context, timing: bool
    ) -> None:
        # Only what the fast path reads; the rest is set when first needed.
        self.decl = decl
        self.plan = plan
        self.reducer = reducer
        self.ctx = ctx
        self.records: list[tuple[Handler, HandlerStatus, float, str | None]] = []
        self.timing = timing
        self.generation = 0
        self.slow = False
        self.started = 0.0

    def start(self) -> list[tuple[Handler, HandlerStatus, float, str | None]] | None:
        """Run the chain inline; the records, or ``None`` when a handler suspended
        (then :meth:`resume` must be awaited)."""
        var = _HANDLER_CONTEXT
        token = var.set(var.get())
        chain = self.chain(0, 0)
        try:
            self.first = chain.send(None)
        except StopIteration:
            var.reset(token)
            return self.records
        self.pending = chain
        self.token = token
        return None

    async def resume(
        self, tracker: Tracker
    ) -> list[tuple[Handler, HandlerStatus, float, str | None]]:
        """Continue after a handler suspended: budgets, abandonment, the rest of the plan."""
        plan = self.plan
        n = len(plan)
        chain: Coroutine[Any, Any, int] | None = self.pending
        first = self.first
        self.pending = None
        self.next_start = n
        try:
            while True:
                if chain is None:
                    if self.next_start >= n:
                        break
                    chain = self.chain(self.next_start, self.generation)
                    try:
                        first = chain.send(None)
                    except StopIteration as done:
                        self.next_start = done.value
                        chain = None
                        continue
                # A handler suspended: give the rest of its chain a task and a deadline.
                # Every earlier handler left exactly one record, so this is its index.
                i = len(self.records)
                handler = plan[i]
                self.slow = True
                task = asyncio.get_running_loop().create_task(_finish(chain, first))
                chain = None
                label = f"{handler.plugin_id}:{handler.hook}"
                try:
                    finished, _ = await asyncio.wait((task,), timeout=handler.timeout_s)
                except asyncio.CancelledError:
                    self.generation += 1
                    tracker.track(task, label)
                    raise
                self.slow = False
                if finished:
                    self.next_start = task.result()
                    continue
                self.generation += 1
                tracker.track(task, label)
                budget_ms = (handler.timeout_s or 0) * 1000
                if self.fail(i, _TIMEOUT, f"timed out after {budget_ms:.0f} ms"):
                    break
                self.next_start = i + 1
        finally:
            _HANDLER_CONTEXT.reset(self.token)
        return self.records

    async def chain(self, start: int, gen: int) -> int:
        """Run handlers from ``start``; return where the dispatcher continues.

        The first branch is the hot path (an ungated ``f(event, ctx)`` handler with no
        timing); everything else goes through the general branch below it.
        """
        plan = self.plan
        n = len(plan)
        append = self.records.append
        reducer = self.reducer
        event = reducer.event
        ctx = self.ctx
        bind = _HANDLER_CONTEXT.set
        clock = time.perf_counter
        coroutine = _CoroutineType
        untimed = not self.timing
        for i in range(start, n):
            h = plan[i]
            if untimed and h.fast:
                bind(h.context)
                try:
                    value = h.function(event, ctx)
                    if value is not None and (
                        type(value) is coroutine or asyncio.iscoroutine(value)
                    ):
                        value = await value
                except (Exception, asyncio.CancelledError) as exc:
                    outcome = self._raised(i, gen, exc)
                    if outcome is not None:
                        return outcome
                    continue
                if gen != self.generation:
                    return -1  # abandoned after a timeout: a late result changes nothing
                if value is None:
                    append(h.ok_record)
                elif self.settle(i, value):
                    return n
                else:
                    event = reducer.event  # pipelines hand the next handler a new event
                if self.slow:
                    return i + 1
                continue
            if h.gate is not None:
                append((h, _GATED, 0.0, h.gate))
                continue
            bind(h.context)
            if self.timing:
                self.started = clock()
            try:
                if h.thread:
                    value = await _start_thread(h, event, ctx)
                else:
                    value = h.call(event, ctx)
                if value is not None and (type(value) is coroutine or asyncio.iscoroutine(value)):
                    value = await value
            except (Exception, asyncio.CancelledError) as exc:
                outcome = self._raised(i, gen, exc)
                if outcome is not None:
                    return outcome
                continue
            if gen != self.generation:
                return -1
            if value is None:
                append((h, _OK, clock() - self.started if self.timing else 0.0, None))
            elif self.settle(i, value):
                return n
            else:
                event = reducer.event
            if self.slow:
                return i + 1
        return n

    def _raised(self, i: int, gen: int, exc: BaseException) -> int | None:
        """A handler raised: where the chain goes next (``None``: keep going)."""
        if gen != self.generation:
            return -1
        if isinstance(exc, asyncio.CancelledError) and _cancelled_from_outside():
            raise exc
        if self.fail(i, _ERROR, _describe(exc, self.decl.name, self.plan[i].plugin_id)):
            return len(self.plan)
        if self.slow:
            return i + 1
        return None

    def settle(self, i: int, value: Any) -> bool:
        """Validate and fold in a non-None result; ``True`` when the chain stops."""
        h = self.plan[i]
        model = self.decl.result
        if model is not None and type(value) is not model:
            try:
                value = model.model_validate(value)
            except ValidationError as exc:
                return self.fail(
                    i, _ERROR, f"invalid result for {self.decl.name}: {_first_error(exc)}"
                )
        stop = self.reducer.apply(value, h.plugin_id)
        duration = time.perf_counter() - self.started if self.timing else 0.0
        self.records.append((h, _OK, duration, None))
        if stop:
            _skip_rest(self.plan, i, self.records)
        return stop

    def fail(self, i: int, status: HandlerStatus, error: str) -> bool:
        """Record a failed handler and apply the policy; ``True`` when the chain stops."""
        h = self.plan[i]
        duration = time.perf_counter() - self.started if self.timing else 0.0
        self.records.append((h, status, duration, error))
        log.warning(
            "hook %s: plugin %s failed (%s); policy %s",
            self.decl.name,
            h.plugin_id,
            error,
            self.decl.failure.value,
        )
        if self.decl.failure is not FailurePolicy.FAIL_CLOSED:
            return False
        self.reducer.fail_closed(h.plugin_id, f"plugin {h.plugin_id!r} failed: {error}")
        _skip_rest(self.plan, i, self.records)
        return True


async def run_sequential(
    decl: HookDecl,
    plan: Sequence[Handler],
    reducer: Reducer,
    ctx: Context,
    tracker: Tracker,
    timing: bool = False,
) -> list[tuple[Handler, HandlerStatus, float, str | None]]:
    """Run ``plan`` one handler after another, folding results into ``reducer``.

    ``timing`` measures each handler's duration (reports show 0.0 otherwise).
    """
    run = SequentialRun(decl, plan, reducer, ctx, timing)
    records = run.start()
    if records is None:
        records = await run.resume(tracker)
    return records


def run_sync(
    decl: HookDecl, plan: Sequence[Handler], reducer: Reducer, ctx: Context
) -> list[tuple[Handler, HandlerStatus, float, str | None]]:
    """Run a synchronous pipeline hook; async handlers are ignored (warned at registration)."""
    records: list[tuple[Handler, HandlerStatus, float, str | None]] = []
    result_model = decl.result
    clock = time.perf_counter
    var = _HANDLER_CONTEXT
    token = var.set(var.get())
    try:
        for index, handler in enumerate(plan):
            if handler.gate is not None:
                records.append((handler, HandlerStatus.BLOCKED_BY_GATE, 0.0, handler.gate))
                continue
            if handler.is_async:
                records.append(
                    (handler, HandlerStatus.SKIPPED, 0.0, "async handler ignored on a sync hook")
                )
                continue
            var.set(handler.context)
            started = clock()
            try:
                value = handler.call(reducer.event, ctx)
                if asyncio.iscoroutine(value):
                    value.close()
                    raise TypeError("returned a coroutine on a synchronous hook")
                if value is not None and result_model is not None:
                    value = result_model.model_validate(value)
            except Exception as exc:
                error = (
                    f"invalid result for {decl.name}: {_first_error(exc)}"
                    if isinstance(exc, ValidationError)
                    else _describe(exc, decl.name, handler.plugin_id)
                )
                records.append((handler, HandlerStatus.ERROR, clock() - started, error))
                log.warning("hook %s: plugin %s failed (%s)", decl.name, handler.plugin_id, error)
                continue
            stop = value is not None and reducer.apply(value, handler.plugin_id)
            records.append((handler, HandlerStatus.OK, clock() - started, None))
            if stop:
                _skip_rest(plan, index, records)
                break
    finally:
        var.reset(token)
    return records
