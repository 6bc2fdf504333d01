"""What a dispatch is made of and gives back: compiled handlers, statuses, trace records,
results, and the tracker of handlers it stopped waiting for.

The runners live beside it: :mod:`agentplug.core.sequential` (decision, pipeline, merge
and claim hooks, and the synchronous pipeline) and :mod:`agentplug.core.concurrent`
(observation hooks). The helpers here (failure descriptions, skipped-handler records,
thread start) are shared by both.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import enum
import logging
import math
from collections.abc import Callable, Coroutine, Generator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from agentplug_hookspecs import Context, Event, HandlerContext, HookModel
from pydantic import BaseModel, ValidationError

__all__ = [
    "DispatchResult",
    "FailureSink",
    "Handler",
    "HandlerReport",
    "HandlerStatus",
    "Record",
    "Tracker",
    "capture_failures",
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
    """Plain and ungated: the dispatcher's hot path."""
    inline_sync: bool = False
    """Fast and a plain ``def``: runs to completion inline, never suspends."""
    budget: float = math.inf
    """``timeout_s`` as a number (infinite when the handler has no budget)."""
    ok_record: tuple[Any, ...] = ()
    """The shared trace record of a successful untimed run (no allocation per call)."""

    def __post_init__(self) -> None:
        self.plain = self.call_mode == 2 and not self.thread
        self.fast = self.plain and self.gate is None
        self.inline_sync = self.fast and not self.is_async
        self.budget = math.inf if self.timeout_s is None else self.timeout_s
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


Record = tuple[Handler, HandlerStatus, float, str | None]
"""One handler's line in a dispatch trace: handler, status, seconds, error."""


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
    records: list[Record] = field(default_factory=list)

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


class Tracker:
    """Handlers the runtime stopped waiting for but did not cancel, and handlers seen to
    block the event loop past their budget."""

    def __init__(self) -> None:
        self._tasks: dict[asyncio.Future[Any], str] = {}
        self.overruns: dict[tuple[str, str], tuple[float, float]] = {}
        """``(plugin_id, hook)`` -> (longest inline run, budget), in seconds."""
        self.on_overrun: Callable[[Handler, float], None] | None = None
        """Called once per ``(plugin_id, hook)`` when a handler is first seen to overrun."""

    def overran(self, handler: Handler, elapsed_s: float) -> str:
        """Note that ``handler`` ran ``elapsed_s`` seconds past its budget without yielding
        to the event loop; return the failure text for its trace record."""
        key = (handler.plugin_id, handler.hook)
        first = key not in self.overruns
        longest = max(elapsed_s, self.overruns.get(key, (0.0, 0.0))[0])
        self.overruns[key] = (longest, handler.budget)
        if first and self.on_overrun is not None:
            self.on_overrun(handler, elapsed_s)
        return overrun_message(handler, elapsed_s)

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


def _passes_through(exc: BaseException, closing: bool) -> bool:
    """Whether a handler's exception must leave the dispatch instead of failing the handler:
    ``KeyboardInterrupt``, the dispatching task's own cancellation, and the ``GeneratorExit``
    of a run being closed. ``SystemExit`` and the rest are handler failures."""
    if isinstance(exc, Exception):
        return False
    if isinstance(exc, KeyboardInterrupt):
        return True
    if isinstance(exc, asyncio.CancelledError):
        return _cancelled_from_outside()
    return isinstance(exc, GeneratorExit) and closing


def _cancelled_from_outside() -> bool:
    """Whether the dispatching task itself is being cancelled (as opposed to a handler's
    own ``CancelledError``, which is a failed handler like any other exception)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


FailureSink = Callable[[str, str, BaseException], None]
"""``sink(hook, plugin_id, exception)``: told of every handler that raised."""

_failure_sink: contextvars.ContextVar[FailureSink | None] = contextvars.ContextVar(
    "agentplug_failure_sink", default=None
)


@contextlib.contextmanager
def capture_failures(sink: FailureSink) -> Iterator[None]:
    """Hand every exception a handler raises (in this context) to ``sink``.

    Traces and logs carry the exception type only (messages may hold secrets); an
    operator's tool such as ``agentplug run`` uses this to show the message and, with
    ``-v``, the traceback. Dispatches started inside the block (``asyncio.run`` included)
    report to ``sink``.
    """
    token = _failure_sink.set(sink)
    try:
        yield
    finally:
        _failure_sink.reset(token)


def overrun_message(handler: Handler, elapsed_s: float) -> str:
    """Why a handler that blocked the event loop past its budget counts as timed out."""
    return (
        f"blocked the event loop for {elapsed_s * 1000:.0f} ms, over its "
        f"{handler.budget * 1000:.0f} ms budget: the late result is refused (run blocking "
        "code in a thread with thread=True, or make the handler async)"
    )


def _describe(exc: BaseException, hook: str | None = None, plugin_id: str | None = None) -> str:
    sink = _failure_sink.get()
    if sink is not None and hook is not None and plugin_id is not None:
        sink(hook, plugin_id, exc)
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


async def _coro_type_probe() -> None:
    return None


_probe = _coro_type_probe()
_CoroutineType = type(_probe)
_probe.close()


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
