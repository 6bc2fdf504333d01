"""Compiling handler plans: order, time budgets and gates, resolved once per registry change."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from agentplug_hookspecs import Context, Event, HandlerContext, HookDecl, HookKind

from agentplug.config.model import AgentplugConfig
from agentplug.core import fastpath
from agentplug.core.markers import HandlerOptions, options_of
from agentplug.core.records import HandlerOwner
from agentplug.core.reducers import Reducer
from agentplug.core.results import Handler, Record

__all__ = ["HookPlan", "call_mode", "compile_plan", "gate_reason", "handler_timeout"]

SEQUENTIAL = 0
OBSERVE = 1
SYNC = 2
_MODES = {HookKind.OBSERVE: OBSERVE, HookKind.SYNC: SYNC}


class HookPlan:
    """Everything a dispatch of one hook needs, resolved once per registry change.

    The ordered handlers, the reducer class, the event and context types a pre-built
    payload must have to skip validation, the context used when none is given, whether
    the plan takes the fast path and the records of a dispatch in which every handler
    returned ``None``.
    """

    __slots__ = (
        "ctx",
        "decl",
        "empty_ctx",
        "event",
        "fast_path",
        "handlers",
        "mode",
        "name",
        "ok_records",
        "reducer",
        "untouched",
    )

    def __init__(
        self, decl: HookDecl, handlers: tuple[Handler, ...], reducer: type[Reducer]
    ) -> None:
        self.decl = decl
        self.name = decl.name
        self.handlers = handlers
        self.reducer = reducer
        self.event: type[Event] = decl.event
        self.ctx: type[Context] = decl.ctx
        self.empty_ctx: Context | None = None
        """The shared context of dispatches without one (built on first use)."""
        self.mode = _MODES.get(decl.kind, SEQUENTIAL)
        self.fast_path = (
            fastpath.ENABLED
            and self.mode != SYNC
            and bool(handlers)
            and all(h.inline_sync for h in handlers)
        )
        """Takes the fast path (:mod:`agentplug.core.fastpath`): an asynchronous hook whose
        handlers are all ``inline_sync`` (and the fast path is enabled)."""
        self.ok_records: tuple[Record, ...] = tuple(h.ok_record for h in handlers)
        self.untouched = reducer.untouched(decl)
        """``event -> outcome`` when no handler returned anything or failed."""


def call_mode(argnames: tuple[str, ...]) -> int:
    """How a handler is called, from the hookspec arguments it names (see ``Handler``)."""
    return {(): 0, ("event",): 1, ("event", "ctx"): 2, ("ctx",): 3, ("ctx", "event"): 4}[argnames]


def gate_reason(
    config: AgentplugConfig, decl: HookDecl, plugin_id: str, bundled: bool
) -> str | None:
    """Why ``plugin_id`` may not run its handler of ``decl`` (gates), or ``None``."""
    settings = config.entry(plugin_id).hooks
    if decl.conversation_gate:
        allowed = settings.allow_conversation_access
        if (bundled and allowed is False) or (not bundled and allowed is not True):
            return (
                f"plugin {plugin_id!r} may not register conversation hook {decl.name!r}: "
                f"set plugins.entries.{plugin_id}.hooks.allow_conversation_access = true "
                "to allow it"
            )
    if decl.prompt_gate and settings.allow_prompt_injection is False:
        return (
            f"plugin {plugin_id!r}: prompt hook {decl.name!r} disabled by "
            f"plugins.entries.{plugin_id}.hooks.allow_prompt_injection = false"
        )
    return None


def handler_timeout(
    config: AgentplugConfig,
    decl: HookDecl,
    canonical: str,
    plugin_id: str,
    options: HandlerOptions,
) -> tuple[float | None, str]:
    """A handler's budget in seconds and where it came from (HOOKS.md §2.3)."""
    if decl.kind is HookKind.SYNC:
        return None, "sync hook (no timeout)"
    settings = config.entry(plugin_id).hooks
    base = f"plugins.entries.{plugin_id}.hooks"
    # A deprecated alias (``deactivate``) honours its own key and its target's.
    for name in dict.fromkeys((decl.name, canonical)):
        if name in settings.timeouts:
            return settings.timeouts[name] / 1000, f"{base}.timeouts.{name}"
    if settings.timeout_ms is not None:
        return settings.timeout_ms / 1000, f"{base}.timeout_ms"
    if options.timeout_ms is not None:
        return options.timeout_ms / 1000, "author timeout_ms"
    if decl.default_timeout_ms is not None:
        return decl.default_timeout_ms / 1000, "hook default"
    return config.runtime.default_timeout_ms / 1000, "runtime.default_timeout_ms"


def compile_plan(
    hook: str,
    decls: Mapping[str, HookDecl],
    relay: Any,
    owners: Mapping[str, HandlerOwner],
    config: AgentplugConfig,
    bundled: Mapping[str, bool],
    context_for: Callable[[str], HandlerContext],
) -> tuple[Handler, ...]:
    """The ordered handlers of ``hook`` and its deprecated aliases (descending priority,
    stable ties), each compiled with its budget, gate and calling convention."""
    names = [hook] + [
        d.name
        for d in decls.values()
        if d.deprecation is not None and d.deprecation.alias_of == hook
    ]
    handlers: list[Handler] = []
    for name in names:
        caller = getattr(relay, name, None)
        if caller is None:
            continue
        own_decl = decls[name]
        for impl in caller.get_hookimpls():
            owner = owners[impl.plugin_name]
            options = owner.options or options_of(impl.function)
            timeout_s, timeout_source = handler_timeout(
                config, own_decl, hook, owner.plugin_id, options
            )
            is_async = (
                owner.is_async
                if owner.is_async is not None
                else inspect.iscoroutinefunction(impl.function)
            )
            # A synchronous hook runs every handler inline, with no event loop to hand a
            # thread's result back to: ``thread=True`` does not apply there.
            sync_hook = own_decl.kind is HookKind.SYNC
            handlers.append(
                Handler(
                    plugin_id=owner.plugin_id,
                    hook=name,
                    function=impl.function,
                    call_mode=call_mode(tuple(impl.argnames)),
                    priority=options.priority,
                    seq=owner.seq,
                    timeout_s=timeout_s,
                    timeout_source=timeout_source,
                    context=context_for(owner.plugin_id),
                    thread=options.thread and not is_async and not sync_hook,
                    gate=gate_reason(
                        config, own_decl, owner.plugin_id, bundled.get(owner.plugin_id, True)
                    ),
                    is_async=is_async,
                    sync_hook=sync_hook,
                )
            )
    handlers.sort(key=lambda h: (-h.priority, h.seq))
    return tuple(handlers)
