"""Handler failures: which exceptions are a handler's failure, and how one is described.

Traces and logs carry the exception type only (messages may hold secrets); an operator's
tool that wants the message registers a sink with :func:`capture_failures`.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Callable, Iterator

from pydantic import ValidationError

__all__ = ["FailureSink", "capture_failures", "describe_failure", "passes_through"]

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


def describe_failure(
    exc: BaseException, hook: str | None = None, plugin_id: str | None = None
) -> str:
    """The trace text of a handler's exception (its type only), after telling the sink of
    :func:`capture_failures`, if any, about it."""
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


def passes_through(exc: BaseException, closing: bool) -> bool:
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
