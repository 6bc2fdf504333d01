"""``Run``: the state of one dispatch over its plan, and the general call loop.

:meth:`Run.chain` is the one place a handler is called on the general path: skip it (a
gate), bind its context, call it (in a thread for ``thread=True``), await the coroutine
it returns, time it against its budget and record it. The kinds of run differ only in
what a handler's end means to them (:meth:`Run.ended`, :meth:`Run.raised`):
:class:`~agentplug.core.sequential.SequentialRun` folds results into a reducer and may
stop the chain, :class:`~agentplug.core.sequential.SyncRun` does so without an event
loop, :class:`~agentplug.core.concurrent.ConcurrentRun` only records. The one other
loop over handlers is the fast path (:mod:`agentplug.core.fastpath`), which hands over
to this one.

A runner drives a chain (the coroutine :meth:`Run.chain`) inline with one
``send(None)``: a handler that finishes without suspending costs no task and no timer.
Only a handler that really suspends costs a task (:meth:`Run.detach`): the chain that
was running it finishes that handler alone there, and the runner goes on.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Coroutine, Generator, Sequence
from types import CoroutineType
from typing import Any

from agentplug_hookspecs import Context, Event
from agentplug_hookspecs._model import HANDLER_CONTEXT

from agentplug.core.fastpath import Preset
from agentplug.core.plans import HookPlan
from agentplug.core.reducers import Reducer
from agentplug.core.results import Handler, HandlerStatus, Record, Tracker

__all__ = ["Run"]


async def _in_thread(handler: Handler, event: Event, ctx: Context) -> Any:
    """Call ``handler`` in the default executor, in a copy of the current context (the
    handler's bound), and await the coroutine it may return."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    value = await loop.run_in_executor(None, context.run, handler.invoke, event, ctx)
    if value is not None and asyncio.iscoroutine(value):
        value = await value
    return value


_UNSET: Any = object()


class _Resume:
    """Awaitable continuing a coroutine whose first step already ran inline.

    ``owner`` (a run with a ``closing`` flag) learns when the coroutine is closed from
    outside, so that a ``GeneratorExit`` thrown in is told apart from one a handler raised.
    """

    __slots__ = ("coro", "first", "owner", "result")

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any, owner: Any) -> None:
        self.coro = coro
        self.first = first
        self.owner = owner
        self.result: Any = _UNSET

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, pending = self.coro, self.first
        while True:
            try:
                yield pending
            except GeneratorExit as exc:
                if not _delivered(pending, exc):  # closed from outside, not a handler's own
                    self.owner.closing = True
                    coro.close()
                    raise
                # A future failed with GeneratorExit (a handler raised it in a thread).
                # asyncio delivers it by closing this awaitable: let the chain handle it,
                # then hand its result to ``_finish``, which sees GeneratorExit too.
                try:
                    coro.throw(exc)
                except StopIteration as stop:
                    self.result = stop.value
                    return stop.value
                raise RuntimeError(
                    "a handler chain suspended while handling GeneratorExit"
                ) from exc
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


def _delivered(awaited: Any, exc: BaseException) -> bool:
    """Whether ``exc``, thrown in at a suspension point, is the failure of the awaited
    future (asyncio delivers a future's exception with ``throw``, as ``close`` throws its
    own; a closing coroutine's future is still pending)."""
    return (
        isinstance(awaited, asyncio.Future)
        and awaited.done()
        and not awaited.cancelled()
        and type(awaited.exception()) is type(exc)
    )


async def _finish(coro: Coroutine[Any, Any, Any], first: Any, owner: Any) -> Any:
    resume = _Resume(coro, first, owner)
    try:
        return await resume
    except GeneratorExit:
        if resume.result is not _UNSET:
            return resume.result
        raise


_OK = HandlerStatus.OK
_bind = HANDLER_CONTEXT.set


class Run:
    """State of one dispatch of ``hook``: one record slot per handler, filled in as each
    handler ends (every slot is filled when the run is over).

    ``generation`` moves on each time a chain is detached into a task (:meth:`detach`):
    a chain whose ``gen`` is behind it finishes the handler it was running, leaves that
    handler's record (unless the runner stopped waiting for it) and returns.
    """

    __slots__ = (
        "closing",
        "ctx",
        "decl",
        "event",
        "generation",
        "hook",
        "inline_only",
        "plan",
        "records",
        "reducer",
        "timing",
        "tracker",
    )

    def __init__(
        self,
        hook: HookPlan,
        event: Event,
        ctx: Context,
        tracker: Tracker,
        timing: bool = False,
        done: Sequence[Record] = (),
    ) -> None:
        """``done``: the records of the first handlers, which already ran (the fast path)."""
        plan = hook.handlers
        self.hook = hook
        self.decl = hook.decl
        self.plan = plan
        self.event = event
        """What the next handler is given (a pipeline's reducer replaces it)."""
        self.ctx = ctx
        self.tracker = tracker
        self.timing = timing
        """Record every handler's duration (otherwise ``0.0`` and the shared OK record)."""
        self.reducer: Reducer | None = None
        """Where results fold in (a sequential run makes it when first needed)."""
        # A slot is ``None`` until its handler ends. Every slot is filled by the end of a
        # run, so the list is the trace as it is, without a copy.
        records: list[Record] = [None] * len(plan)  # type: ignore[list-item]
        if done:
            records[: len(done)] = done
        self.records = records
        self.generation = 0
        self.closing = False
        """Set when a detached chain is closed from outside (see ``_Resume``)."""
        self.inline_only = False
        """A coroutine result fails the handler instead of being awaited (no event loop)."""

    def ended(self, i: int, gen: int, value: Any, elapsed: float) -> int | None:
        """Handler ``i`` returned ``value`` after ``elapsed`` seconds, and the chain could
        not record it as a plain success (a value, an overrun, or a chain ``gen`` that was
        detached). Returns where the chain returns (never ``None`` from a detached chain),
        or ``None`` to go on with the next handler."""
        raise NotImplementedError

    def raised(self, i: int, gen: int, exc: BaseException, elapsed: float) -> int | None:
        """Handler ``i`` raised ``exc`` after ``elapsed`` seconds: as :meth:`ended` (and
        re-raises what must leave the dispatch)."""
        raise NotImplementedError

    def suspended(self, start: int) -> int:
        """The handler in which the chain that started at ``start`` suspended: the first
        without a record (each handler before it in that chain left one)."""
        return self.records.index(None, start)  # type: ignore[arg-type]

    def detach(self, chain: Coroutine[Any, Any, int], first: Any) -> asyncio.Task[Any]:
        """Hand ``chain``, suspended in a handler (its first step yielded ``first``), to a
        task that finishes that handler only."""
        self.generation += 1
        return asyncio.get_running_loop().create_task(_finish(chain, first, self))

    async def chain(self, start: int, gen: int, preset: Preset | None = None) -> int:
        """Call the handlers from ``start`` in order; return where the runner continues:
        the plan's length when the chain ran to its end or stopped, else what the last
        handler's :meth:`ended` or :meth:`raised` said. ``preset``: handler ``start``
        already ran on the fast path and this is what it did.
        """
        plan = self.plan
        n = len(plan)
        records = self.records
        ctx = self.ctx
        bind = _bind
        clock = time.perf_counter
        coroutine = CoroutineType
        timing = self.timing
        inline_only = self.inline_only
        if preset is not None:
            where = await self._preset(start, gen, preset)
            if where is not None:
                return where
            start += 1
        event = self.event
        last = clock()
        for i in range(start, n):
            h = plan[i]
            if h.skip is not None:
                records[i] = h.skip
                continue
            bind(h.context)
            try:
                value = _in_thread(h, event, ctx) if h.thread else h.invoke(event, ctx)
                if value is not None and (type(value) is coroutine or asyncio.iscoroutine(value)):
                    if inline_only:
                        value.close()
                        raise TypeError("returned a coroutine on a synchronous hook")
                    value = await value
                    if gen != self.generation:
                        break  # detached while suspended: handler ``i`` is its last
            except BaseException as exc:
                where = self.raised(i, gen, exc, clock() - last)
                if where is not None:
                    return where
                last = clock()
                continue
            now = clock()
            elapsed = now - last
            last = now
            if value is None and elapsed <= h.budget:  # the common case, recorded here
                records[i] = (h, _OK, elapsed, None) if timing else h.ok_record
                continue
            where = self.ended(i, gen, value, elapsed)
            if where is not None:
                return where
            event = self.event  # a pipeline hands the next handler a new event
        else:
            return n
        where = self.ended(i, gen, value, clock() - last)
        return -1 if where is None else where

    async def _preset(self, i: int, gen: int, preset: Preset) -> int | None:
        """Take over handler ``i`` from the fast path: await the coroutine it returned (in
        its context, as :meth:`chain` would), then record it."""
        value, exc, elapsed = preset
        if exc is None and (type(value) is CoroutineType or asyncio.iscoroutine(value)):
            HANDLER_CONTEXT.set(self.plan[i].context)
            started = time.perf_counter() - elapsed
            try:
                value = await value
            except BaseException as late:
                exc = late
            elapsed = time.perf_counter() - started
        if exc is not None:
            return self.raised(i, gen, exc, elapsed)
        return self.ended(i, gen, value, elapsed)
