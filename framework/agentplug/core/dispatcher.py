"""``HookDispatcher``: runs one hook over its compiled plan.

:class:`~agentplug.core.host.PluginHost` builds on it: the host registers plugins and
compiles plans; this class validates payloads, picks the path (the fast path,
:mod:`agentplug.core.fastpath`, or the runner for the hook's kind) and reduces the
results (HOOKS.md §2).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any

from agentplug_hookspecs import Context, Event, HookDecl, HookKind
from agentplug_hookspecs.common import ObserveOutcome

from agentplug.config.model import AgentplugConfig
from agentplug.config.suggest import did_you_mean
from agentplug.core.concurrent import run_concurrent
from agentplug.core.fastpath import run_fast_path
from agentplug.core.observability import Observer
from agentplug.core.observability import trace_log as _trace_log
from agentplug.core.plans import OBSERVE, SEQUENTIAL, SYNC, HookPlan
from agentplug.core.reducers import Reducer
from agentplug.core.results import DispatchResult, Tracker
from agentplug.core.sequential import SequentialRun, run_sync

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
        self._plans: dict[str, HookPlan] = {}
        """Compiled plans by canonical hook name (cleared when the registry changes)."""
        self._reducers: dict[str, type[Reducer]] = {}
        self.timings = False
        """Measure each handler's duration (on when observing; ``agentplug run`` sets it)."""
        self.observer = Observer()
        """Structured logs (logger ``agentplug.trace``) and optional tracing."""
        self.tracker = Tracker()
        """Handlers that timed out and still run (see :meth:`aclose`), and overruns."""

    def _build_plan(self, hook: str) -> HookPlan:
        raise NotImplementedError

    def _decl(self, hook: str) -> HookDecl:
        decl = self._decls.get(hook)
        if decl is None:
            hint = did_you_mean(hook, self._decls)
            raise LookupError(f"unknown hook {hook!r}{hint}")
        return decl

    # -- dispatch ---------------------------------------------------------------------

    def _prepare(
        self,
        hook: str,
        event: Event | Mapping[str, Any] | None,
        ctx: Context | Mapping[str, Any] | None,
    ) -> tuple[HookPlan, Event, Context]:
        decl = self._decls.get(hook) or self._decl(hook)
        if decl.deprecation is not None and decl.deprecation.alias_of:
            decl = self._decl(decl.deprecation.alias_of)
        plan = self._plans.get(decl.name) or self._build_plan(decl.name)
        if type(event) is not plan.event:
            event = plan.event.model_validate(event if event is not None else {})
        if ctx is None:
            ctx = plan.empty_ctx or _empty_ctx(plan)
        elif not isinstance(ctx, plan.ctx):
            ctx = plan.ctx.model_validate(ctx)
        assert isinstance(event, Event)
        return plan, event, ctx

    async def dispatch(
        self,
        hook: str,
        event: Event | Mapping[str, Any] | None = None,
        ctx: Context | Mapping[str, Any] | None = None,
    ) -> DispatchResult[Any]:
        """Run every handler of ``hook`` with the hook's rules; return the outcome."""
        plan = self._plans.get(hook)
        if plan is None or type(event) is not plan.event:
            plan, ev, cx = self._prepare(hook, event, ctx)
        else:
            ev = event
            if type(ctx) is plan.ctx:
                cx = ctx
            elif ctx is None:
                cx = plan.empty_ctx or _empty_ctx(plan)
            else:
                plan, ev, cx = self._prepare(hook, event, ctx)
        if self.observer.tracer is not None or _trace_log.isEnabledFor(logging.DEBUG):
            return await self._observed(plan, ev, cx)
        if self.timings:
            return await self._dispatch(plan, ev, cx, True)
        mode = plan.mode
        if plan.fast_path:
            # The fast path; the first handler that does more than return ``None`` in
            # time hands over to the general path with what it did.
            values_end = mode == SEQUENTIAL
            stopped = run_fast_path(plan.handlers, ev, cx, values_end)
            if stopped is None:
                outcome = plan.untouched(ev) if values_end else _OBSERVED
                return DispatchResult(plan.name, outcome, list(plan.ok_records))
            at, preset = stopped
            if not values_end:
                records = await run_concurrent(
                    plan, ev, cx, self.tracker, done=plan.ok_records[:at], preset=preset
                )
                return DispatchResult(plan.name, _OBSERVED, records)
            run = SequentialRun(plan, ev, cx, self.tracker, False, plan.ok_records[:at])
            done = run.start(at, preset)
        elif mode == SYNC:
            return self._run_sync(plan, ev, cx)
        elif mode == OBSERVE:
            records = await run_concurrent(plan, ev, cx, self.tracker)
            return DispatchResult(plan.name, _OBSERVED, records)
        else:
            run = SequentialRun(plan, ev, cx, self.tracker)
            done = run.start()
        records = done if done is not None else await run.resume()
        return DispatchResult(plan.name, run.outcome(), records)

    async def _observed(self, plan: HookPlan, ev: Event, cx: Context) -> DispatchResult[Any]:
        observer = self.observer
        started = time.perf_counter_ns()
        result = await self._dispatch(plan, ev, observer.fill_context(cx), True)
        observer.record(plan.decl, result, started, time.perf_counter_ns())
        return result

    async def _dispatch(
        self, plan: HookPlan, ev: Event, cx: Context, timing: bool
    ) -> DispatchResult[Any]:
        """The general path (every handler timed when ``timing``)."""
        mode = plan.mode
        if mode == OBSERVE:
            records = await run_concurrent(plan, ev, cx, self.tracker, timing)
            return DispatchResult(plan.name, _OBSERVED, records)
        if mode == SYNC:
            return self._run_sync(plan, ev, cx, timing)
        run = SequentialRun(plan, ev, cx, self.tracker, timing)
        done = run.start()
        records = done if done is not None else await run.resume()
        return DispatchResult(plan.name, run.outcome(), records)

    def _run_sync(
        self, plan: HookPlan, ev: Event, cx: Context, timing: bool = False
    ) -> DispatchResult[Any]:
        reducer = plan.reducer(plan.decl, ev)
        records = run_sync(plan, reducer, cx, self.tracker, timing)
        return DispatchResult(plan.name, reducer.finish(), records)

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
        plan, ev, cx = self._prepare(hook, event, ctx)
        if plan.mode != SYNC:
            raise TypeError(
                f"hook {hook!r} is {plan.decl.kind.value}, not sync: use `await "
                "host.dispatch(...)` or host.sync.dispatch(...)"
            )
        return self._run_sync(plan, ev, cx, self.timings)

    def emit(
        self,
        hook: str,
        event: Event | Mapping[str, Any] | None = None,
        ctx: Context | Mapping[str, Any] | None = None,
    ) -> asyncio.Task[DispatchResult[Any]]:
        """Fire-and-forget dispatch of an observation hook; the task is tracked."""
        plan, ev, cx = self._prepare(hook, event, ctx)
        task = asyncio.get_running_loop().create_task(self.dispatch(plan.name, ev, cx))
        self.tracker.track(task, f"emit:{plan.name}")
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


def _empty_ctx(plan: HookPlan) -> Context:
    plan.empty_ctx = plan.ctx()
    return plan.empty_ctx


_OBSERVED = ObserveOutcome()
SEQUENTIAL_KINDS = frozenset({HookKind.DECIDE, HookKind.PIPELINE, HookKind.MERGE, HookKind.CLAIM})
