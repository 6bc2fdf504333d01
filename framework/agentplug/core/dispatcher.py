"""``HookDispatcher``: runs one hook over its compiled plan (the dispatch hot path).

:class:`~agentplug.core.host.PluginHost` builds on it: the host registers plugins and
compiles plans; this class validates payloads, picks the runner for the hook's kind and
reduces the results (HOOKS.md §2).
"""

from __future__ import annotations

import asyncio
import difflib
import logging
import time
from collections.abc import Mapping
from typing import Any

from agentplug_hookspecs import Context, Event, HookDecl, HookKind
from agentplug_hookspecs.common import ObserveOutcome

from agentplug.core.concurrent import run_concurrent
from agentplug.core.config import AgentplugConfig
from agentplug.core.dispatch import DispatchResult, Handler, Tracker
from agentplug.core.observability import Observer
from agentplug.core.observability import trace_log as _trace_log
from agentplug.core.reducers import Reducer
from agentplug.core.sequential import SequentialRun, run_sequential, run_sync

__all__ = ["SEQUENTIAL_KINDS", "HookDispatcher"]

log = logging.getLogger("agentplug.host")


class HookDispatcher:
    """Dispatch state and entry points: ``dispatch``, ``call_sync``, ``emit``, ``aclose``.

    Subclasses fill the catalogue (``_decls`` and the tables derived from it) and
    compile plans in :meth:`_build_plan`.
    """

    def __init__(self, config: AgentplugConfig) -> None:
        self.config = config
        self._decls: dict[str, HookDecl] = {}
        self._plans: dict[str, tuple[Handler, ...]] = {}
        self._reducers: dict[str, type[Reducer]] = {}
        self._direct: dict[str, HookDecl] = {}
        self._sequential: set[str] = set()
        """Hooks dispatched under their own name (no alias): the fast lookup."""
        self._empty_ctx: dict[str, Context] = {}
        self.timings = False
        """Measure each handler's duration (on when observing; ``agentplug run`` sets it)."""
        self.observer = Observer()
        """Structured logs (logger ``agentplug.trace``) and optional tracing."""
        self.tracker = Tracker()
        """Handlers that timed out and still run (see :meth:`aclose`)."""

    def _build_plan(self, hook: str) -> tuple[Handler, ...]:
        raise NotImplementedError

    def _decl(self, hook: str) -> HookDecl:
        decl = self._decls.get(hook)
        if decl is None:
            close = difflib.get_close_matches(hook, list(self._decls), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise LookupError(f"unknown hook {hook!r}{hint}")
        return decl

    # -- dispatch ---------------------------------------------------------------------

    def _prepare(
        self,
        hook: str,
        event: Event | Mapping[str, Any] | None,
        ctx: Context | Mapping[str, Any] | None,
    ) -> tuple[HookDecl, Event, Context]:
        decl = self._decls.get(hook) or self._decl(hook)
        if decl.deprecation is not None and decl.deprecation.alias_of:
            decl = self._decl(decl.deprecation.alias_of)
        if type(event) is not decl.event:
            event = decl.event.model_validate(event if event is not None else {})
        if ctx is None:
            ctx = self._empty_ctx[decl.name]
        elif not isinstance(ctx, decl.ctx):
            ctx = decl.ctx.model_validate(ctx)
        assert isinstance(event, Event)
        return decl, event, ctx

    async def dispatch(
        self,
        hook: str,
        event: Event | Mapping[str, Any] | None = None,
        ctx: Context | Mapping[str, Any] | None = None,
    ) -> DispatchResult[Any]:
        """Run every handler of ``hook`` with the hook's rules; return the outcome."""
        decl = self._direct.get(hook)
        if decl is not None and type(event) is decl.event and type(ctx) is decl.ctx:
            ev: Event = event
            cx: Context = ctx
        else:
            decl, ev, cx = self._prepare(hook, event, ctx)
        observer = self.observer
        if observer.tracer is not None or _trace_log.isEnabledFor(logging.DEBUG):
            started = time.perf_counter_ns()
            result = await self._dispatch(decl, ev, observer.fill_context(cx), True)
            observer.record(decl, result, started, time.perf_counter_ns())
            return result
        name = decl.name
        if name in self._sequential:
            # The common path, inlined: no extra coroutine layer per dispatch.
            plan = self._plans.get(name) or self._build_plan(name)
            reducer = self._reducers[name](decl, ev)
            run = SequentialRun(decl, plan, reducer, cx, self.timings)
            records = run.start()
            if records is None:
                records = await run.resume(self.tracker)
            return DispatchResult(name, reducer.finish(), records)
        return await self._dispatch(decl, ev, cx, self.timings)

    async def _dispatch(
        self, decl: HookDecl, ev: Event, cx: Context, timing: bool
    ) -> DispatchResult[Any]:
        name = decl.name
        plan = self._plans.get(name) or self._build_plan(name)
        kind = decl.kind
        if kind is HookKind.OBSERVE:
            records = await run_concurrent(decl, plan, ev, cx, self.tracker)
            return DispatchResult(name, _OBSERVED, records)
        if kind is HookKind.SYNC:
            return self._run_sync(decl, ev, cx)
        reducer = self._reducers[name](decl, ev)
        records = await run_sequential(decl, plan, reducer, cx, self.tracker, timing)
        return DispatchResult(name, reducer.finish(), records)

    def _run_sync(self, decl: HookDecl, ev: Event, cx: Context) -> DispatchResult[Any]:
        plan = self._plans.get(decl.name) or self._build_plan(decl.name)
        reducer = self._reducers[decl.name](decl, ev)
        records = run_sync(decl, plan, reducer, cx)
        return DispatchResult(decl.name, reducer.finish(), records)

    def enable_tracing(self, tracer: Any = None) -> None:
        """Emit OpenTelemetry spans per dispatch and per handler (needs ``[otel]``)."""
        self.observer.enable_tracing(tracer)

    def call_sync(
        self,
        hook: str,
        event: Event | Mapping[str, Any] | None = None,
        ctx: Context | Mapping[str, Any] | None = None,
    ) -> DispatchResult[Any]:
        """Run a synchronous hook (``tool_result_persist``, ``before_message_write``)."""
        decl, ev, cx = self._prepare(hook, event, ctx)
        if decl.kind is not HookKind.SYNC:
            raise TypeError(
                f"hook {hook!r} is {decl.kind.value}, not sync: use `await host.dispatch(...)` "
                "or host.sync.dispatch(...)"
            )
        return self._run_sync(decl, ev, cx)

    def emit(
        self,
        hook: str,
        event: Event | Mapping[str, Any] | None = None,
        ctx: Context | Mapping[str, Any] | None = None,
    ) -> asyncio.Task[DispatchResult[Any]]:
        """Fire-and-forget dispatch of an observation hook; the task is tracked."""
        decl, ev, cx = self._prepare(hook, event, ctx)
        task = asyncio.get_running_loop().create_task(self.dispatch(decl.name, ev, cx))
        self.tracker.track(task, f"emit:{decl.name}")
        return task

    async def aclose(self, timeout_s: float | None = None) -> list[str]:
        """Wait (bounded) for handlers still running after their timeout.

        Returns the ``plugin_id:hook`` labels of those still running at the deadline.
        """
        budget = (
            timeout_s if timeout_s is not None else self.config.runtime.shutdown_timeout_ms / 1000
        )
        leftover = await self.tracker.drain(budget)
        for label in leftover:
            log.warning("handler %s still running at shutdown; not waiting any longer", label)
        return leftover


_OBSERVED = ObserveOutcome()
SEQUENTIAL_KINDS = frozenset({HookKind.DECIDE, HookKind.PIPELINE, HookKind.MERGE, HookKind.CLAIM})
