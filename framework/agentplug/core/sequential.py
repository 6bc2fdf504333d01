"""Sequential hooks: handlers run one after another and fold into a reducer.

Three ways through, cheapest first:

* the fast path (:mod:`agentplug.core.fastpath`): a plan of plain ``def`` handlers runs
  with no coroutine, task or timer for as long as handlers return ``None`` within their
  budget. The first handler that returns a value, raises or overruns hands over to
  :class:`SequentialRun` with what it did (a :data:`~agentplug.core.fastpath.Preset`).
* :meth:`SequentialRun.start`: the handlers run inside the general call loop
  (:meth:`~agentplug.core.runs.Run.chain`), a coroutine driven with one ``send(None)``:
  a handler that finishes without suspending costs no task and no timer either.
* :meth:`SequentialRun.resume`: only a handler that really suspends gets a task, awaited
  with its time budget.

A handler that blocks the loop past its budget (a sync ``time.sleep``) cannot be stopped,
but its late result is refused: it counts as timed out and the hook's failure policy
applies. :class:`SyncRun` (:func:`run_sync`) is the synchronous pipeline of
``tool_result_persist`` and ``before_message_write``: the same loop, driven without an
event loop.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Sequence
from typing import Any

from agentplug_hookspecs import Context, FailurePolicy, HookModel
from agentplug_hookspecs._model import HANDLER_CONTEXT
from pydantic import ValidationError

from agentplug.core.failures import describe_failure, passes_through
from agentplug.core.fastpath import Preset
from agentplug.core.plans import HookPlan
from agentplug.core.reducers import Reducer
from agentplug.core.results import Handler, HandlerStatus, Record, Tracker
from agentplug.core.runs import Run

__all__ = ["SequentialRun", "SyncRun", "run_sync"]

log = logging.getLogger("agentplug.dispatch")

_OK = HandlerStatus.OK
_ERROR = HandlerStatus.ERROR
_TIMEOUT = HandlerStatus.TIMEOUT


class SequentialRun(Run):
    """State of one sequential dispatch.

    The handlers run inside :meth:`~agentplug.core.runs.Run.chain`, driven with one
    ``send(None)`` (:meth:`start`): when every handler finishes without suspending, the
    whole chain completes in that single step (one ``StopIteration`` per dispatch, no
    task, no timer). When a handler suspends, :meth:`resume` takes over: the chain is
    detached into a task that finishes that handler only, awaited with the handler's
    budget, and a fresh chain goes on after it. On a timeout the detached chain is
    abandoned (whatever the stuck handler returns later changes nothing): while
    :meth:`resume` waits, the detached chain's generation is the one just behind
    ``generation``; when it stops waiting it moves ``generation`` on once more.

    The reducer is made when a handler first returns something or fails (see
    :meth:`outcome`): a dispatch in which every handler returned ``None`` needs none.
    """

    __slots__ = ("first", "pending", "token")

    pending: Coroutine[Any, Any, int] | None

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
        next_start = n
        tracker = self.tracker
        try:
            while True:
                if chain is None:
                    if next_start >= n:
                        break
                    chain = self.chain(next_start, self.generation)
                    try:
                        first = chain.send(None)
                    except StopIteration as done:
                        next_start = done.value
                        chain = None
                        continue
                # A handler suspended: give the rest of it a task and a deadline.
                i = self.suspended(0)
                handler = plan[i]
                task = self.detach(chain, first)
                chain = None
                label = f"{handler.plugin_id}:{handler.hook}"
                try:
                    finished, _ = await asyncio.wait((task,), timeout=handler.timeout_s)
                except asyncio.CancelledError:
                    self.generation += 1
                    tracker.track(task, label)
                    raise
                if finished:
                    next_start = task.result()
                    continue
                self.generation += 1
                tracker.track(task, label)
                budget = handler.timeout_s or 0.0
                if self.fail(i, _TIMEOUT, f"timed out after {budget * 1000:.0f} ms", budget):
                    break
                next_start = i + 1
        finally:
            HANDLER_CONTEXT.reset(self.token)
        return self.records

    def ended(self, i: int, gen: int, value: Any, elapsed: float) -> int | None:
        """Fold in what handler ``i`` returned. Past its budget, a handler that ran inline
        blocked the loop; one that suspended (its chain detached) timed out."""
        detached = gen != self.generation
        if detached and gen != self.generation - 1:
            return -1  # abandoned: a late result changes nothing
        h = self.plan[i]
        if elapsed > h.budget:
            error = (
                f"timed out after {h.budget * 1000:.0f} ms"
                if detached
                else self.tracker.overran(h, elapsed)
            )
            stop = self.fail(i, _TIMEOUT, error, elapsed)
        elif value is None:
            self.records[i] = (h, _OK, elapsed, None) if self.timing else h.ok_record
            stop = False
        else:
            stop = self.settle(i, value, elapsed)
        if stop:
            return len(self.plan)
        return i + 1 if detached else None

    def raised(self, i: int, gen: int, exc: BaseException, elapsed: float) -> int | None:
        """A handler raised: where the chain goes next (``None``: keep going)."""
        detached = gen != self.generation
        if detached and gen != self.generation - 1:
            return -1
        if passes_through(exc, self.closing):
            raise exc
        error = describe_failure(exc, self.decl.name, self.plan[i].plugin_id)
        if self.fail(i, _ERROR, error, elapsed):
            return len(self.plan)
        return i + 1 if detached else None

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
        self.records[i] = (h, _OK, elapsed if self.timing else 0.0, None)
        if stop:
            _skip_rest(self.plan, i, self.records)
        return stop

    def fail(self, i: int, status: HandlerStatus, error: str, elapsed: float = 0.0) -> bool:
        """Record a failed handler and apply the policy; ``True`` when the chain stops."""
        h = self.plan[i]
        self.records[i] = (h, status, elapsed if self.timing else 0.0, error)
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


class SyncRun(Run):
    """One dispatch of a synchronous pipeline hook: the general loop, driven to its end in
    one ``send(None)`` with no event loop. Nothing suspends: ``async def`` handlers are
    skipped (:attr:`~agentplug.core.results.Handler.skip`), a coroutine result fails its
    handler, a failure never stops the pipeline and no handler has a budget."""

    __slots__ = ()

    def __init__(
        self, hook: HookPlan, reducer: Reducer, ctx: Context, tracker: Tracker, timing: bool
    ) -> None:
        super().__init__(hook, reducer.event, ctx, tracker, timing)
        self.reducer = reducer
        self.inline_only = True

    def ended(self, i: int, gen: int, value: Any, elapsed: float) -> int | None:
        """Validate a non-None result and fold it in; a stopping result skips the rest."""
        h = self.plan[i]
        model = self.decl.result
        if value is not None and model is not None:
            try:
                value = model.model_validate(value)
            except BaseException as exc:
                self.raised(i, gen, exc, elapsed)
                return None
        reducer = self.reducer
        assert reducer is not None  # given to __init__
        stop = value is not None and reducer.apply(value, h.plugin_id)
        self.event = reducer.event
        self.records[i] = (h, _OK, elapsed, None)
        if stop:
            _skip_rest(self.plan, i, self.records)
            return len(self.plan)
        return None

    def raised(self, i: int, gen: int, exc: BaseException, elapsed: float) -> int | None:
        """Record the failure and go on (only ``KeyboardInterrupt`` leaves the dispatch:
        without an event loop there is no task to be cancelled)."""
        if isinstance(exc, KeyboardInterrupt):
            raise exc
        h = self.plan[i]
        # A ValidationError, whether the handler's own or its result's, reads as an
        # invalid result.
        error = (
            f"invalid result for {self.decl.name}: {_first_error(exc)}"
            if isinstance(exc, ValidationError)
            else describe_failure(exc, self.decl.name, h.plugin_id)
        )
        self.records[i] = (h, _ERROR, elapsed, error)
        log.warning("hook %s: plugin %s failed (%s)", self.decl.name, h.plugin_id, error)
        return None


def run_sync(
    hook: HookPlan, reducer: Reducer, ctx: Context, tracker: Tracker, timing: bool = False
) -> list[Record]:
    """Run a synchronous pipeline hook; async handlers are ignored (warned at registration).

    ``timing``: give each handler's record its duration, as the asynchronous hooks do
    when the host observes (otherwise a handler that returned nothing shares one record).
    """
    run = SyncRun(hook, reducer, ctx, tracker, timing)
    var = HANDLER_CONTEXT
    token = var.set(var.get())
    chain = run.chain(0, 0)
    try:
        chain.send(None)
    except StopIteration:
        return run.records
    finally:
        var.reset(token)
    # Unreachable: no handler of a SyncRun is awaited, so the chain never suspends.
    chain.close()
    raise RuntimeError(f"hook {hook.name}: a synchronous pipeline suspended")


_STOPPED = "a terminal decision stopped the chain"


def _skip_rest(plan: Sequence[Handler], index: int, records: list[Record]) -> None:
    for j in range(index + 1, len(plan)):
        later = plan[j]
        if later.gate is not None:
            records[j] = (later, HandlerStatus.BLOCKED_BY_GATE, 0.0, later.gate)
        else:
            records[j] = (later, HandlerStatus.SKIPPED, 0.0, _STOPPED)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "<result>"
    return f"{loc}: {err['msg']}"
