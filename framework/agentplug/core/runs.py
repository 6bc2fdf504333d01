"""Running handlers: what every runner shares to call a handler and to continue, in a
task, a chain of handlers that suspended.

A runner drives a chain of handlers (a coroutine) inline with one ``send(None)``; only a
handler that really suspends costs a task (:func:`finish`).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine, Generator
from typing import Any

from agentplug_hookspecs import Context, Event

from agentplug.core.results import Handler

__all__ = ["CoroutineType", "Preset", "finish", "start_thread"]


async def _coro_type_probe() -> None:
    return None


_probe = _coro_type_probe()
CoroutineType = type(_probe)
"""The type of native coroutines: ``type(value) is CoroutineType`` is the cheap test."""
_probe.close()

Preset = tuple[Any, BaseException | None, float]
"""What a handler did before a run took over: (returned value, raised, seconds)."""


def start_thread(handler: Handler, event: Event, ctx: Context) -> asyncio.Future[Any]:
    """Call ``handler`` in the default executor, in a copy of the current context."""
    loop = asyncio.get_running_loop()
    context = contextvars.copy_context()
    return loop.run_in_executor(None, context.run, handler.call, event, ctx)


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
                # then hand its result to ``finish``, which sees GeneratorExit too.
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


async def finish(coro: Coroutine[Any, Any, Any], first: Any, owner: Any) -> Any:
    """Run ``coro``, whose first step already ran inline and yielded ``first``, to its end
    (in the task that awaits this). ``owner`` is the run the coroutine belongs to."""
    resume = _Resume(coro, first, owner)
    try:
        return await resume
    except GeneratorExit:
        if resume.result is not _UNSET:
            return resume.result
        raise
