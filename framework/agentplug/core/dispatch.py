"""The dispatch engine: ordered, timed, failure-isolated handler execution.

Hot-path notes (see ``bench/``): a handler that finishes without suspending is driven
to completion inline with ``coro.send(None)``: no task, no timer. Only a handler that
really suspends is wrapped in a task and waited for with its time budget; when the
budget runs out the runtime stops waiting, does *not* cancel it, and tracks it so
shutdown can wait for it or report it.
"""

from __future__ import annotations

import asyncio
import contextvars
import enum
import logging
import time
from collections.abc import Callable, Coroutine, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from agentplug_hookspecs import Context, Event, FailurePolicy, HandlerContext, HookDecl, HookModel
from agentplug_hookspecs._model import _HANDLER_CONTEXT
from pydantic import BaseModel, ValidationError

from agentplug.core.reducers import Reducer

__all__ = [
    "DispatchResult",
    "Handler",
    "HandlerReport",
    "HandlerStatus",
    "Tracker",
]

log = logging.getLogger("agentplug.dispatch")
OutcomeT = TypeVar("OutcomeT", bound=HookModel)


class HandlerStatus(enum.StrEnum):
    """What happened to one handler in one dispatch."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    SKIPPED = "skipped"
    BLOCKED_BY_GATE = "blocked-by-gate"


@dataclass(slots=True, eq=False)
class Handler:
    """One compiled handler: a plugin's implementation of one hook, ready to call."""

    plugin_id: str
    hook: str
    """The hook the handler was written for (an alias resolves to its target)."""
    function: Callable[..., Any]
    call_mode: int
    """0: f(), 1: f(event), 2: f(event, ctx), 3: f(ctx), 4: f(ctx, event)."""
    priority: int
    seq: int
    timeout_s: float | None
    timeout_source: str
    context: HandlerContext
    thread: bool = False
    gate: str | None = None
    """Why the handler is not run (gates), or ``None``."""
    is_async: bool = False
    plain: bool = False
    """Called as ``f(event, ctx)`` inline (no thread)."""
    fast: bool = False
    """Plain and ungated, timed only on request: the dispatcher's hot path."""
    ok_record: tuple[Any, ...] = ()
    """The shared trace record of a successful untimed run (no allocation per call)."""

    def __post_init__(self) -> None:
        self.plain = self.call_mode == 2 and not self.thread
        self.fast = self.plain and self.gate is None
        self.ok_record = (self, HandlerStatus.OK, 0.0, None)

    def call(self, event: Event, ctx: Context) -> Any:
        """Invoke the function with the arguments it asked for."""
        mode = self.call_mode
        if mode == 2:
            return self.function(event, ctx)
        if mode == 1:
            return self.function(event)
        if mode == 0:
            return self.function()
        if mode == 3:
            return self.function(ctx)
        return self.function(ctx, event)


class HandlerReport(BaseModel):
    """One line of a dispatch trace."""

    plugin_id: str
    hook: str
    status: HandlerStatus
    duration_ms: float
    priority: int
    error: str | None = None


@dataclass(slots=True)
class DispatchResult(Generic[OutcomeT]):
    """The reduced outcome of one dispatch plus the per-handler trace."""

    hook: str
    outcome: OutcomeT
    records: list[tuple[Handler, HandlerStatus, float, str | None]] = field(default_factory=list)

    @property
    def handlers(self) -> list[HandlerReport]:
        """Per-handler reports in execution (priority) order."""
        return [
            HandlerReport(
                plugin_id=h.plugin_id,
                hook=h.hook,
                status=status,
                duration_ms=round(duration * 1000.0, 3),
                priority=h.priority,
                error=error,
            )
            for h, status, duration, error in self.records
        ]


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


class Tracker:
    """Handlers the runtime stopped waiting for but did not cancel."""

    def __init__(self) -> None:
        self._tasks: dict[asyncio.Future[Any], str] = {}

    def track(self, task: asyncio.Future[Any], label: str) -> None:
        """Keep ``task`` referenced until it ends; log how it ended."""
        self._tasks[task] = label
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Future[Any]) -> None:
        label = self._tasks.pop(task, "?")
        if task.cancelled():
            log.info("abandoned handler %s was cancelled", label)
        elif task.exception() is not None:
            log.warning(
                "abandoned handler %s failed late: %s", label, type(task.exception()).__name__
            )
        else:
            log.info("abandoned handler %s finished late", label)

    @property
    def pending(self) -> list[str]:
        """Labels (``plugin_id:hook``) of handlers still running after their timeout."""
        return sorted(self._tasks.values())

    async def drain(self, timeout_s: float) -> list[str]:
        """Wait up to ``timeout_s`` for abandoned handlers; return those still running."""
        tasks = list(self._tasks)
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)
        return self.pending


class _Timeout(Exception):
    pass


def _cancelled_from_outside() -> bool:
    """Whether the dispatching task itself is being cancelled (as opposed to a handler's
    own ``CancelledError``, which is a failed handler like any other exception)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _describe(exc: BaseException) -> str:
    # Exception *types* only: messages may carry secrets or confidential reasons. The
    # one message we do show is our own read-only notice, which carries no data.
    if isinstance(exc, ValidationError) and any(
        e["type"] in ("frozen_instance", "frozen_field") for e in exc.errors()
    ):
        return _READ_ONLY
    if isinstance(exc, TypeError) and str(exc).startswith("hook events are read-only"):
        return _READ_ONLY
    return f"raised {type(exc).__name__}"


_READ_ONLY = (
    "tried to modify the read-only event: return a result instead "
    "(e.g. {'content': ...} or {'params': {...}})"
)


def _start_thread(handler: Handler, event: Event, ctx: Context) -> asyncio.Future[Any]:
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    return loop.run_in_executor(None, context.run, handler.call, event, ctx)


_OK = HandlerStatus.OK
_ERROR = HandlerStatus.ERROR
_TIMEOUT = HandlerStatus.TIMEOUT
_GATED = HandlerStatus.BLOCKED_BY_GATE


class _SequentialRun:
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
        if self.fail(i, _ERROR, _describe(exc)):
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
    run = _SequentialRun(decl, plan, reducer, ctx, timing)
    records = run.start()
    if records is None:
        records = await run.resume(tracker)
    return records


async def _coro_type_probe() -> None:
    return None


_probe = _coro_type_probe()
_CoroutineType = type(_probe)
_probe.close()


_STOPPED = "a terminal decision stopped the chain"


def _skip_rest(
    plan: Sequence[Handler],
    index: int,
    records: list[tuple[Handler, HandlerStatus, float, str | None]],
) -> None:
    for later in plan[index + 1 :]:
        if later.gate is not None:
            records.append((later, HandlerStatus.BLOCKED_BY_GATE, 0.0, later.gate))
        else:
            records.append((later, HandlerStatus.SKIPPED, 0.0, _STOPPED))


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err["loc"]) or "<result>"
    return f"{loc}: {err['msg']}"


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
                slots.append((handler, HandlerStatus.ERROR, clock() - started, _describe(exc)))
                log.warning(
                    "hook %s: plugin %s failed (%s)", decl.name, handler.plugin_id, _describe(exc)
                )
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
                    reason = _describe(failure)
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
                    else _describe(exc)
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
