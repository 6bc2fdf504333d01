"""The fast path: a plan of plain ``def`` handlers run in one loop, with no coroutine.

It mirrors the per-handler step of the general call loop
(:meth:`agentplug.core.runs.Run.chain`: bind the handler's context, call it, time it
against its budget) for the only case that needs no coroutine, task or timer: handlers
that are ``inline_sync`` (a ``def``, behind no gate, in no thread) returning ``None``
within their budget (on an observation hook, anything but a coroutine: what they return
is ignored). That is every dispatch whose handlers only watch, the hot path of a host.
The first handler that does anything else (returns a value or a coroutine, raises,
overruns its budget) ends the loop: where it stopped and what that handler did (a
:data:`Preset`) go to the general path, which records that handler as it would have and
runs the rest. The handlers before it returned ``None`` in time: their record is their
shared ``ok_record``, as the general loop would have written it.

:data:`ENABLED` switches the fast path off, so that every dispatch takes the general
path: the conformance suite runs once each way, and ``test_fast_path_agrees`` compares
the two, to show that both give the same outcomes and statuses.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from types import CoroutineType
from typing import Any

from agentplug_hookspecs import Context, Event
from agentplug_hookspecs._model import HANDLER_CONTEXT

from agentplug.core.results import Handler

__all__ = ["ENABLED", "Preset", "run_fast_path"]

ENABLED = True
"""Whether plans compiled from now on may take the fast path (a plan reads it once, when
it is compiled: see :class:`~agentplug.core.plans.HookPlan`). Tests set it to ``False``
to force the general path; nothing else should."""


Preset = tuple[Any, BaseException | None, float]
"""What a handler did before the general path took over: (returned value, raised,
seconds)."""


def run_fast_path(
    handlers: Sequence[Handler], event: Event, ctx: Context, values_end: bool
) -> tuple[int, Preset] | None:
    """Call ``handlers`` (all ``inline_sync``) in order while each returns ``None`` in time.

    ``values_end``: any value other than ``None`` ends the loop (sequential hooks fold
    it); otherwise only a coroutine does (observation hooks await it). Returns ``None``
    when every handler ran so, else ``(index, preset)`` of the handler that did not.
    """
    bind = _bind
    clock = _clock
    token = bind(handlers[0].context)
    last = clock()
    for h in handlers:
        bind(h.context)
        try:
            value = h.invoke(event, ctx)
        except BaseException as exc:
            _reset(token)
            return handlers.index(h), (None, exc, clock() - last)
        now = clock()
        if (
            value is not None
            and (values_end or type(value) is CoroutineType or asyncio.iscoroutine(value))
        ) or now - last > h.budget:
            _reset(token)
            return handlers.index(h), (value, None, now - last)
        last = now
    _reset(token)
    return None


# Bound once: the fast path makes no bound method per dispatch.
_bind = HANDLER_CONTEXT.set
_reset = HANDLER_CONTEXT.reset
_clock = time.perf_counter
