"""Sequential hooks: handlers run one after another and fold into a reducer.

Three ways through, cheapest first:

* the dispatcher's straight loop (:meth:`~agentplug.core.dispatcher.HookDispatcher.dispatch`):
  a plan of plain ``def`` handlers runs with no coroutine, task or timer for as long as
  handlers return ``None`` within their budget, at one call, one context binding and one
  clock read per handler. The first handler that returns a value, raises or overruns
  hands over to :class:`SequentialRun` with what it did (a :data:`Preset`).
* :meth:`SequentialRun.start`: the handlers run inside :meth:`SequentialRun.chain`, a
  coroutine driven with one ``send(None)``; a handler that finishes without suspending
  costs no task and no timer either.
* :meth:`SequentialRun.resume`: only a handler that really suspends gets a task, awaited
  with its time budget.

A handler that blocks the loop past its budget (a sync ``time.sleep``) cannot be stopped,
but its late result is refused: it counts as timed out and the hook's failure policy
applies. ``run_sync`` is the synchronous pipeline of ``tool_result_persist`` and
``before_message_write``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Coroutine, Sequence
from typing import Any

from agentplug_hookspecs import Context, Event, FailurePolicy, HookDecl, HookModel
from agentplug_hookspecs._model import HANDLER_CONTEXT
from pydantic import ValidationError

from agentplug.core.failures import describe_failure, passes_through
from agentplug.core.plans import HookPlan
from agentplug.core.reducers import Reducer
from agentplug.core.results import Handler, HandlerStatus, Record, Tracker
from agentplug.core.runs import CoroutineType, Preset, finish, start_thread

__all__ = ["Preset", "SequentialRun", "run_sync"]

log = logging.getLogger("agentplug.dispatch")

_OK = HandlerStatus.OK
_ERROR = HandlerStatus.ERROR
_TIMEOUT = HandlerStatus.TIMEOUT
_GATED = HandlerStatus.BLOCKED_BY_GATE


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
        "closing",
        "ctx",
        "decl",
        "event",
        "first",
        "generation",
        "hook",
        "next_start",
        "pending",
        "plan",
        "records",
        "reducer",
        "slow",
        "timing",
        "token",
        "tracker",
    )

    pending: Coroutine[Any, Any, int] | None

    def __init__(
        self,
        hook: HookPlan,
        event: Event,
        ctx: Context,
        tracker: Tracker,
        timing: bool = False,
        records: list[Record] | None = None,
    ) -> None:
        # Only what the fast path reads; the rest is set when first needed. The reducer
        # is made when a handler first returns something or fails (see ``outcome``).
        self.hook = hook
        self.decl = hook.decl
        self.plan = hook.handlers
        self.event = event
        self.reducer: Reducer | None = None
        self.ctx = ctx
        self.tracker = tracker
        self.records: list[Record] = [] if records is None else records
        self.timing = timing
        self.generation = 0
        self.slow = False
        self.closing = False

    def _reducer(self) -> Reducer:
        reducer = self.reducer
        if reducer is None:
            reducer = self.reducer = self.hook.reducer(self.decl, self.event)
        return reducer

    def outcome(self) -> HookModel:
        """The reduced outcome (the shared "nothing happened" one when no handler returned
        anything or failed)."""
        if self.reducer is None:
            return self.hook.untouched(self.event)
        return self.reducer.finish()

    def start(self, at: int = 0, preset: Preset | None = None) -> list[Record] | None:
        """Run the chain inline from handler ``at`` (whose outcome ``preset`` already is,
        when given); the records, or ``None`` when a handler suspended (then :meth:`resume`
        must be awaited)."""
        var = HANDLER_CONTEXT
        token = var.set(var.get())
        chain = self.chain(at, 0, preset)
        try:
            self.first = chain.send(None)
        except StopIteration:
            var.reset(token)
            return self.records
        except BaseException:
            var.reset(token)
            raise
        self.pending = chain
        self.token = token
        return None

    async def resume(self) -> list[Record]:
        """Continue after a handler suspended: budgets, abandonment, the rest of the plan."""
        plan = self.plan
        n = len(plan)
        chain: Coroutine[Any, Any, int] | None = self.pending
        first = self.first
        self.pending = None
        self.next_start = n
        tracker = self.tracker
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
                task = asyncio.get_running_loop().create_task(finish(chain, first, self))
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
                budget = handler.timeout_s or 0.0
                if self.fail(i, _TIMEOUT, f"timed out after {budget * 1000:.0f} ms", budget):
                    break
                self.next_start = i + 1
        finally:
            HANDLER_CONTEXT.reset(self.token)
        return self.records

    async def chain(self, start: int, gen: int, preset: Preset | None = None) -> int:
        """Run handlers from ``start``; return where the dispatcher continues.

        The first branch is the hot path (an ungated ``f(event, ctx)`` handler returning
        ``None`` in time); everything else goes through :meth:`_after` or the general
        branch below it.
        """
        plan = self.plan
        n = len(plan)
        append = self.records.append
        ctx = self.ctx
        bind = HANDLER_CONTEXT.set
        clock = time.perf_counter
        coroutine = CoroutineType
        timing = self.timing
        if preset is not None:  # handler ``start`` already ran in the straight loop
            value, exc, elapsed = preset
            if exc is not None:
                where = self._raised(start, gen, exc, elapsed)
            else:
                if type(value) is coroutine or asyncio.iscoroutine(value):
                    started = clock() - elapsed
                    try:
                        value = await value
                    except BaseException as late:
                        where = self._raised(start, gen, late, clock() - started)
                        if where is not None:
                            return where
                        return await self.chain(start + 1, gen)
                    elapsed = clock() - started
                    if gen != self.generation:
                        return -1
                where = self._after(start, value, elapsed)
            if where is not None:
                return where
            start += 1
        event = self.event
        last = clock()
        for i in range(start, n):
            h = plan[i]
            if h.fast:
                bind(h.context)
                try:
                    value = h.function(event, ctx)
                    if value is not None and (
                        type(value) is coroutine or asyncio.iscoroutine(value)
                    ):
                        value = await value
                        # Only an awaited handler can have been moved into a task
                        # (``slow``) or abandoned after a timeout (``generation``).
                        if self.slow or gen != self.generation:
                            if gen != self.generation:
                                return -1  # abandoned: a late result changes nothing
                            where = self._after(i, value, clock() - last)
                            return i + 1 if where is None else where
                except BaseException as exc:
                    where = self._raised(i, gen, exc, clock() - last)
                    if where is not None:
                        return where
                    last = clock()
                    continue
                now = clock()
                elapsed = now - last
                last = now
                if value is None and elapsed <= h.budget:
                    append((h, _OK, elapsed, None) if timing else h.ok_record)
                    continue
                where = self._after(i, value, elapsed)
                if where is not None:
                    return where
                event = self.event  # pipelines hand the next handler a new event
                continue
            if h.gate is not None:
                append((h, _GATED, 0.0, h.gate))
                continue
            bind(h.context)
            try:
                if h.thread:
                    value = await start_thread(h, event, ctx)
                else:
                    value = h.call(event, ctx)
                if value is not None and (type(value) is coroutine or asyncio.iscoroutine(value)):
                    value = await value
            except BaseException as exc:
                where = self._raised(i, gen, exc, clock() - last)
                if where is not None:
                    return where
                last = clock()
                continue
            if gen != self.generation:
                return -1
            now = clock()
            where = self._after(i, value, now - last)
            last = now
            if where is not None:
                return where
            event = self.event
        return n

    def _after(self, i: int, value: Any, elapsed: float) -> int | None:
        """Fold in what handler ``i`` returned after ``elapsed`` seconds; where the chain
        returns, or ``None`` to go on with the next handler. Past its budget, a handler
        that ran inline blocked the loop; one that suspended (``slow``) timed out."""
        h = self.plan[i]
        if elapsed > h.budget:
            error = (
                f"timed out after {h.budget * 1000:.0f} ms"
                if self.slow
                else self.tracker.overran(h, elapsed)
            )
            stop = self.fail(i, _TIMEOUT, error, elapsed)
        elif value is None:
            self.records.append((h, _OK, elapsed, None) if self.timing else h.ok_record)
            stop = False
        else:
            stop = self.settle(i, value, elapsed)
        if stop:
            return len(self.plan)
        if self.slow:
            return i + 1
        return None

    def _raised(self, i: int, gen: int, exc: BaseException, elapsed: float) -> int | None:
        """A handler raised: where the chain goes next (``None``: keep going)."""
        if gen != self.generation:
            return -1
        if passes_through(exc, self.closing):
            raise exc
        error = describe_failure(exc, self.decl.name, self.plan[i].plugin_id)
        if self.fail(i, _ERROR, error, elapsed):
            return len(self.plan)
        if self.slow:
            return i + 1
        return None

    def settle(self, i: int, value: Any, elapsed: float = 0.0) -> bool:
        """Validate and fold in a non-None result; ``True`` when the chain stops."""
        h = self.plan[i]
        model = self.decl.result
        if model is not None and type(value) is not model:
            try:
                value = model.model_validate(value)
            except ValidationError as exc:
                return self.fail(
                    i, _ERROR, f"invalid result for {self.decl.name}: {_first_error(exc)}", elapsed
                )
        reducer = self._reducer()
        stop = reducer.apply(value, h.plugin_id)
        self.event = reducer.event
        self.records.append((h, _OK, elapsed if self.timing else 0.0, None))
        if stop:
            _skip_rest(self.plan, i, self.records)
        return stop

    def fail(self, i: int, status: HandlerStatus, error: str, elapsed: float = 0.0) -> bool:
        """Record a failed handler and apply the policy; ``True`` when the chain stops."""
        h = self.plan[i]
        self.records.append((h, status, elapsed if self.timing else 0.0, error))
        log.warning(
            "hook %s: plugin %s failed (%s); policy %s",
            self.decl.name,
            h.plugin_id,
            error,
            self.decl.failure.value,
        )
        if self.decl.failure is not FailurePolicy.FAIL_CLOSED:
            return False
        self._reducer().fail_closed(h.plugin_id, f"plugin {h.plugin_id!r} failed: {error}")
        _skip_rest(self.plan, i, self.records)
        return True


def run_sync(
    decl: HookDecl, plan: Sequence[Handler], reducer: Reducer, ctx: Context
) -> list[Record]:
    """Run a synchronous pipeline hook; async handlers are ignored (warned at registration)."""
    records: list[Record] = []
    result_model = decl.result
    clock = time.perf_counter
    var = HANDLER_CONTEXT
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
            except BaseException as exc:
                if isinstance(exc, KeyboardInterrupt):
                    raise
                error = (
                    f"invalid result for {decl.name}: {_first_error(exc)}"
                    if isinstance(exc, ValidationError)
                    else describe_failure(exc, decl.name, handler.plugin_id)
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


_STOPPED = "a terminal decision stopped the chain"


def _skip_rest(plan: Sequence[Handler], index: int, records: list[Record]) -> None:
    for later in plan[index + 1 :]:
        if later.gate is not None:
            records.append((later, HandlerStatus.BLOCKED_BY_GATE, 0.0, later.gate))
        else:
            records.append((later, HandlerStatus.SKIPPED, 0.0, _STOPPED))


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "<result>"
    return f"{loc}: {err['msg']}"
