"""What a dispatch is made of and gives back: compiled handlers, statuses, trace records,
results, and the tracker of handlers it stopped waiting for.

Records are filled in by the fast path (:mod:`agentplug.core.fastpath`) and by the
general call loop (:mod:`agentplug.core.runs`) with its runners in
:mod:`agentplug.core.sequential` (decision, pipeline, merge and claim hooks, and the
synchronous pipeline) and :mod:`agentplug.core.concurrent` (observation hooks).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from agentplug_hookspecs import Context, Event, HandlerContext, HookModel
from pydantic import BaseModel

__all__ = [
    "DispatchResult",
    "Handler",
    "HandlerReport",
    "HandlerStatus",
    "Record",
    "Tracker",
    "overrun_message",
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
    """Run in a worker thread (a plain ``def`` that blocks); never on a synchronous hook."""
    gate: str | None = None
    """Why the handler is not run (gates), or ``None``."""
    is_async: bool = False
    sync_hook: bool = False
    """The hook is synchronous: nothing awaits there, so an ``async def`` handler is skipped."""
    inline_sync: bool = False
    """Run (not skipped), in no thread, and a ``def``: runs to completion inline, never
    suspends (what the fast path runs, :mod:`agentplug.core.fastpath`)."""
    budget: float = math.inf
    """``timeout_s`` as a number (infinite when the handler has no budget)."""
    ok_record: tuple[Any, ...] = ()
    """The shared trace record of a successful untimed run (no allocation per call)."""
    skip: tuple[Any, ...] | None = None
    """The trace record of a handler that is not called (blocked by a gate, or an
    ``async def`` on a synchronous hook), or ``None`` for one that runs."""
    invoke: Callable[[Event, Context], Any] = field(init=False, repr=False)
    """Calls the function as ``invoke(event, ctx)`` with the arguments it asked for: the
    function itself when it takes ``(event, ctx)``, else an adapter."""

    def __post_init__(self) -> None:
        if self.gate is not None:
            self.skip = (self, HandlerStatus.BLOCKED_BY_GATE, 0.0, self.gate)
        elif self.sync_hook and self.is_async:
            self.skip = (self, HandlerStatus.SKIPPED, 0.0, "async handler ignored on a sync hook")
        self.inline_sync = not self.thread and self.skip is None and not self.is_async
        self.budget = math.inf if self.timeout_s is None else self.timeout_s
        self.ok_record = (self, HandlerStatus.OK, 0.0, None)
        self.invoke = _invoker(self.function, self.call_mode)


def _invoker(function: Callable[..., Any], mode: int) -> Callable[[Event, Context], Any]:
    if mode == 2:
        return function
    if mode == 1:
        return lambda event, ctx: function(event)
    if mode == 0:
        return lambda event, ctx: function()
    if mode == 3:
        return lambda event, ctx: function(ctx)
    return lambda event, ctx: function(ctx, event)


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


def overrun_message(handler: Handler, elapsed_s: float) -> str:
    """Why a handler that blocked the event loop past its budget counts as timed out."""
    return (
        f"blocked the event loop for {elapsed_s * 1000:.0f} ms, over its "
        f"{handler.budget * 1000:.0f} ms budget: the late result is refused (run blocking "
        "code in a thread with thread=True, or make the handler async)"
    )
