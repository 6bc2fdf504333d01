"""``PluginHost``: registers plugins, builds ordered handler plans, dispatches hooks."""

from __future__ import annotations

import asyncio
import difflib
import inspect
import logging
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy
from agentplug_hookspecs import (
    PROJECT_NAME,
    Context,
    Event,
    HandlerContext,
    HookDecl,
    HookKind,
    builtin_declarations,
    declarations_in,
    deep_freeze,
)
from agentplug_hookspecs.common import ObserveOutcome
from pydantic import BaseModel, Field

from agentplug.core.config import AgentplugConfig
from agentplug.core.dispatch import (
    DispatchResult,
    Handler,
    Tracker,
    _SequentialRun,
    run_concurrent,
    run_sequential,
    run_sync,
)
from agentplug.core.errors import (
    AgentplugError,
    DuplicatePluginError,
    HookSignatureError,
    PluginLoadError,
    UnknownHookError,
)
from agentplug.core.facade import HookFacade
from agentplug.core.markers import HandlerOptions, check_timeout_ms, options_of
from agentplug.core.observability import Observer
from agentplug.core.observability import trace_log as _trace_log
from agentplug.core.reducers import Reducer, reducer_for
from agentplug.core.services import ServiceRegistry
from agentplug.core.sync import SyncHost

__all__ = ["PluginApi", "PluginHost", "PluginRecord"]

log = logging.getLogger("agentplug.host")

_IMPL_OPTS: dict[str, Any] = {
    "wrapper": False,
    "hookwrapper": False,
    "optionalhook": False,
    "tryfirst": False,
    "trylast": False,
    "specname": None,
}


class PluginRecord(BaseModel):
    """What the host knows about one registered (or failed) plugin."""

    plugin_id: str
    bundled: bool
    distribution: str | None = None
    version: str | None = None
    source: str | None = None
    hooks: list[str] = Field(default_factory=list)
    refused_hooks: list[str] = Field(default_factory=list)
    """Hooks refused by a gate (conversation access, prompt injection)."""
    warnings: list[str] = Field(default_factory=list)
    error: str | None = None


class _OnHandler:
    """A pluggy plugin object carrying one ``api.on(...)`` handler."""

    def __init__(self, hook: str, function: Callable[..., Any]) -> None:
        self.hook_name = hook
        setattr(self, hook, function)


class _PluginManager(pluggy.PluginManager):
    def parse_hookimpl_opts(self, plugin: object, name: str) -> Any:
        if isinstance(plugin, _OnHandler):
            return dict(_IMPL_OPTS) if name == plugin.hook_name else None
        return super().parse_hookimpl_opts(plugin, name)


@dataclass(slots=True)
class _Owner:
    plugin_id: str
    seq: int
    options: HandlerOptions | None
    is_async: bool | None = None


def _call_mode(argnames: tuple[str, ...]) -> int:
    return {(): 0, ("event",): 1, ("event", "ctx"): 2, ("ctx",): 3, ("ctx", "event"): 4}[argnames]


def _positional_wrapper(function: Callable[..., Any]) -> Callable[..., Any]:
    """Adapt a handler whose parameters are not named ``event``/``ctx`` (seed style).

    Raises ``TypeError`` when the handler cannot be called with ``(event, ctx)``.
    """
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return lambda event, ctx: function(event, ctx)
    params = list(signature.parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    required = [p for p in positional if p.default is p.empty]
    keyword_only = [p for p in params if p.kind is p.KEYWORD_ONLY and p.default is p.empty]
    has_var = any(p.kind is p.VAR_POSITIONAL for p in params)
    if len(required) > 2 or keyword_only:
        extra = [p.name for p in required[2:] + keyword_only]
        raise TypeError(
            f"handler {getattr(function, '__qualname__', function)!r} requires argument(s) "
            f"{extra} that a hook never passes; handlers receive (event, ctx)"
        )
    names = tuple(p.name for p in required)
    if names in {(), ("event",), ("event", "ctx")} and len(positional) == len(required):
        return function
    if has_var or len(positional) >= 2:
        return lambda event, ctx: function(event, ctx)
    if len(positional) == 1:
        return lambda event: function(event)
    return lambda: function()


class PluginApi:
    """What ``register(api)`` receives: the imperative registration surface."""

    def __init__(self, host: PluginHost, record: PluginRecord) -> None:
        self._host = host
        self._record = record
        self.plugin_id = record.plugin_id
        """This plugin's id."""
        self.logger = logging.getLogger(f"agentplug.plugin.{record.plugin_id}")
        """A logger named after the plugin."""

    @property
    def plugin_config(self) -> Mapping[str, Any]:
        """The resolved ``plugins.entries.<id>.config`` (read-only)."""
        return self._host._handler_context(self.plugin_id).plugin_config

    @property
    def host(self) -> PluginHost:
        """The host this plugin is registered with."""
        return self._host

    def on(
        self,
        hook: str,
        handler: Callable[..., Any],
        *,
        priority: int = 0,
        timeout_ms: int | None = None,
        thread: bool = False,
        optional: bool = False,
    ) -> None:
        """Register ``handler`` for ``hook`` (seed style: ``api.on(name, fn, priority=50)``)."""
        where = f"plugin {self.plugin_id!r}: api.on({hook!r})"
        if not callable(handler):
            raise TypeError(f"{where}: handler must be callable, got {type(handler).__name__}")
        if isinstance(priority, bool) or not isinstance(priority, int):
            raise TypeError(f"{where}: priority must be an integer; got {priority!r}")
        options = HandlerOptions(priority, check_timeout_ms(timeout_ms, where), thread)
        if hook not in self._host._decls:
            if optional:
                return
            raise UnknownHookError(self.plugin_id, self._host._unknown_hook_message(hook))
        is_async = inspect.iscoroutinefunction(handler)
        try:
            adapted = _positional_wrapper(handler)
        except TypeError as exc:
            raise HookSignatureError(self.plugin_id, f"api.on({hook!r}): {exc}") from None
        self._host._register_object(
            _OnHandler(hook, adapted),
            self._record,
            options=options,
            is_async=is_async,
        )

    def add_hookspecs(self, namespace: ModuleType | type | object) -> list[str]:
        """Add hookspecs declared with ``agentplug_hookspecs.declare`` (extensions)."""
        return self._host.add_hookspecs(namespace)

    def register_trusted_tool_policy(
        self, policy_id: str, evaluate: Callable[..., Any], *, description: str = ""
    ) -> Any:
        """Register a trusted tool policy (runs before ordinary ``before_tool_call``).

        Installed plugins must be explicitly enabled and declare ``policy_id`` in
        ``plugins.entries.<id>.contracts.trusted_tool_policies``.
        """
        return self._host.trusted_policies.register(
            self._record, policy_id, evaluate, description=description
        )

    @property
    def session(self) -> Any:
        """Session services: ``api.session.state`` and ``api.session.workflow``."""
        return self._host.sessions.api_for(self._record)

    def register_session_extension(self, *args: Any, **kwargs: Any) -> Any:
        """Deprecated alias of ``api.session.state.register_session_extension``."""
        self._deprecated(
            "api.register_session_extension", "api.session.state.register_session_extension"
        )
        return self.session.state.register_session_extension(*args, **kwargs)

    def enqueue_next_turn_injection(self, *args: Any, **kwargs: Any) -> Any:
        """Deprecated alias of ``api.session.workflow.enqueue_next_turn_injection``."""
        self._deprecated(
            "api.enqueue_next_turn_injection", "api.session.workflow.enqueue_next_turn_injection"
        )
        return self.session.workflow.enqueue_next_turn_injection(*args, **kwargs)

    def _deprecated(self, old: str, new: str) -> None:
        self._host._warn_once(
            self._record,
            old,
            f"plugin {self.plugin_id!r} uses deprecated {old}; use {new} instead",
        )


class PluginHost:
    """Registers plugins and dispatches hooks with agentplug's rules (HOOKS.md §2).

    ``await host.dispatch("before_tool_call", {"tool_name": "exec", "params": {...}})``
    returns a :class:`DispatchResult` with the reduced ``outcome`` and per-handler
    ``handlers``. ``host.hooks.<name>(...)`` is the typed equivalent.
    """

    def __init__(
        self,
        config: AgentplugConfig | Mapping[str, Any] | None = None,
        *,
        builtin_hooks: bool = True,
        store: Any = None,
        state_dir: str | Path | None = None,
    ) -> None:
        self.config = (
            config if isinstance(config, AgentplugConfig) else AgentplugConfig.parse(config)
        )
        self.state_dir: str | Path | None = state_dir or self.config.runtime.state_dir
        """Folder of the durable state store (``None``: in memory)."""
        self.services = ServiceRegistry(self)
        """The services attached to this host (see :mod:`agentplug.core.services`)."""
        if store is not None:
            self.services.put("store", store)
        self._pm = _PluginManager(PROJECT_NAME)
        self._decls: dict[str, HookDecl] = {}
        self._records: dict[str, PluginRecord] = {}
        self._owners: dict[str, _Owner] = {}
        self._plans: dict[str, tuple[Handler, ...]] = {}
        self._reducers: dict[str, type[Reducer]] = {}
        self._direct: dict[str, HookDecl] = {}
        self._hookspec_sources: set[str] = set()
        self._sequential: set[str] = set()
        """Hooks dispatched under their own name (no alias): the fast lookup."""
        self._empty_ctx: dict[str, Context] = {}
        self._contexts: dict[str, HandlerContext] = {}
        self._bundled: dict[str, bool] = {}
        self._seq = 0
        self._warned: set[tuple[str, str]] = set()
        self._sync: SyncHost | None = None
        self.timings = False
        """Measure each handler's duration (on when observing; ``agentplug run`` sets it)."""
        self.observer = Observer()
        """Structured logs (logger ``agentplug.trace``) and optional tracing."""
        self.tracker = Tracker()
        """Handlers that timed out and still run (see :meth:`aclose`)."""
        self.load_errors: list[PluginLoadError] = []
        """Plugins that failed to load (installed discovery isolates failures)."""
        self.failed_plugins: list[PluginRecord] = []
        """Records (with ``error``) of plugins that failed to load."""
        if builtin_hooks:
            self._add_declarations(builtin_declarations().values(), source=None)
            from agentplug_hookspecs import BUILTIN_SPEC_MODULES

            for module in BUILTIN_SPEC_MODULES:
                self._pm.add_hookspecs(module)
        self.hooks = HookFacade(self)
        """Typed facade: one awaitable method per built-in hook."""

    @property
    def sync(self) -> SyncHost:
        """The blocking facade (created on first use; owns a private event loop)."""
        if self._sync is None:
            self._sync = SyncHost(self)
        return self._sync

    # Shortcuts to the services the package root wires (``agentplug.core.services``):
    # typed access is ``host.services.get(SessionServices)``.

    @property
    def store(self) -> Any:
        """Durable state (grants, session extensions, injection queues): a ``StateStore``."""
        return self.services.named("store")

    @property
    def trusted_policies(self) -> Any:
        """Trusted tool policies (run before ordinary ``before_tool_call`` handlers)."""
        return self.services.named("trusted_policies")

    @property
    def sessions(self) -> Any:
        """Session extensions, next-turn injections and cleanup callbacks."""
        return self.services.named("sessions")

    @property
    def actions(self) -> Any:
        """The action runtime (``await host.actions.load()`` collects actions)."""
        return self.services.named("actions")

    def _warn_once(
        self,
        record: PluginRecord,
        key: str,
        message: str,
        *,
        category: type[Warning] | None = DeprecationWarning,
    ) -> None:
        """Record and log ``message`` once per plugin and ``key`` (and warn if a category)."""
        if (record.plugin_id, key) in self._warned:
            return
        self._warned.add((record.plugin_id, key))
        record.warnings.append(message)
        log.warning(message)
        if category is not None:
            warnings.warn(message, category, stacklevel=4)

    # -- the catalogue ----------------------------------------------------------------

    @property
    def declarations(self) -> Mapping[str, HookDecl]:
        """Every known hook declaration (built-in and added)."""
        return self._decls

    def _add_declarations(self, decls: Iterable[HookDecl], source: str | None) -> list[str]:
        added = []
        for decl in decls:
            if decl.name in self._decls and self._decls[decl.name] is not decl:
                raise AgentplugError(
                    f"hookspec {decl.name!r}{' from ' + source if source else ''} is already "
                    "declared; pick another name for the new hook"
                )
            self._decls[decl.name] = decl
            self._reducers[decl.name] = reducer_for(decl)
            if decl.deprecation is None or decl.deprecation.alias_of is None:
                self._direct[decl.name] = decl
            if decl.kind in _SEQUENTIAL:
                self._sequential.add(decl.name)
            self._empty_ctx[decl.name] = decl.ctx()
            added.append(decl.name)
        return added

    def add_hookspecs(self, namespace: ModuleType | type | object) -> list[str]:
        """Add the declared hookspecs of ``namespace``; return their names."""
        decls = list(declarations_in(namespace))
        source = getattr(namespace, "__name__", repr(namespace))
        if not decls:
            raise AgentplugError(
                f"{source} declares no hookspec: decorate each hook function with "
                "agentplug_hookspecs.declare(...)"
            )
        names = self._add_declarations(decls, source)
        self._pm.add_hookspecs(namespace)  # type: ignore[arg-type]
        self._plans.clear()
        return names

    def _unknown_hook_message(self, hook: str) -> str:
        close = difflib.get_close_matches(hook, list(self._decls), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        return (
            f"implements unknown hook {hook!r}{hint} (run `agentplug hooks` for the list, "
            "or mark it optional=True if another package declares it)"
        )

    # -- registration -----------------------------------------------------------------

    @property
    def plugins(self) -> list[PluginRecord]:
        """Registered plugins in registration order."""
        return list(self._records.values())

    def register(
        self,
        plugin: object,
        plugin_id: str | None = None,
        *,
        bundled: bool = True,
        distribution: str | None = None,
        version: str | None = None,
        source: str | None = None,
    ) -> PluginRecord:
        """Register a plugin (module, object, class or ``register(api)`` function).

        Decorated ``@hookimpl`` functions/methods are registered with pluggy (which
        checks their arguments against the hookspec); a ``register(api)`` callable is
        called with a :class:`PluginApi`. Raises :class:`PluginLoadError` (naming the
        plugin and the cause) and leaves nothing half-registered on failure.
        """
        pid = plugin_id or _default_id(plugin)
        if pid in self._records:
            raise DuplicatePluginError(pid, "a plugin with this id is already registered")
        if inspect.isclass(plugin):
            try:
                plugin = plugin()
            except Exception as exc:
                raise PluginLoadError(pid, f"could not instantiate {exc!r}") from exc
        record = PluginRecord(
            plugin_id=pid,
            bundled=bundled,
            distribution=distribution,
            version=version,
            source=source or getattr(plugin, "__name__", type(plugin).__qualname__),
        )
        self._records[pid] = record
        self._bundled[pid] = bundled
        try:
            if _has_hookimpls(plugin):
                self._register_object(plugin, record)
            register = _register_callable(plugin)
            if register is not None:
                returned = register(PluginApi(self, record))
                if inspect.isawaitable(returned):
                    if inspect.iscoroutine(returned):
                        returned.close()
                    raise PluginLoadError(pid, "register(api) must be synchronous")
        except PluginLoadError:
            self._forget(pid)
            raise
        except Exception as exc:
            self._forget(pid)
            raise PluginLoadError(pid, f"register(api) raised {exc!r}") from exc
        if not record.hooks:
            log.info("plugin %s registered no hook handler", pid)
        return record

    def load_installed(
        self, *, use_cache: bool = True, cache_dir: Path | None = None
    ) -> list[PluginRecord]:
        """Discover and register installed plugins (entry-point group ``agentplug``).

        Third-party hookspecs (group ``agentplug.hookspecs``) load first. Config filters
        (``plugins.enabled``, ``allow``, ``deny``, ``entries.<id>.enabled``) apply before
        any plugin code is imported. A plugin that fails (import error, bad signature,
        unknown hook, failing ``register``) is recorded in :attr:`load_errors` with its
        id and cause; the others still load.
        """
        from agentplug.core.loader import ENTRY_POINT_GROUP, HOOKSPEC_GROUP, discover

        # Extra plugin sources (the install target, ejected copies) come from the
        # ``plugin_sources`` service when one is wired; the core knows none itself.
        prefer_ejected_copy = (
            self.services.named("plugin_sources").prepare()
            if self.services.has("plugin_sources")
            else _no_preference
        )
        for spec in discover(HOOKSPEC_GROUP, use_cache=use_cache, cache_dir=cache_dir):
            if spec.name in self._hookspec_sources:
                continue  # a reload: these hooks are declared already
            try:
                self.add_hookspecs(spec.load())
                self._hookspec_sources.add(spec.name)
            except Exception as exc:
                self._load_failed(spec.name, spec.distribution, spec.version, f"hookspecs: {exc!r}")
        loaded: list[PluginRecord] = []
        settings = self.config.plugins
        if not settings.enabled:
            return loaded
        for found in discover(ENTRY_POINT_GROUP, use_cache=use_cache, cache_dir=cache_dir):
            pid = found.name
            if settings.allow and pid not in settings.allow:
                continue
            if pid in settings.deny or not self.config.entry(pid).enabled:
                continue
            if pid in self._records:
                continue
            # An ejected (local, editable) copy of the plugin wins over the installed one.
            prefer_ejected_copy(pid)
            try:
                obj = found.load()
            except Exception as exc:
                self._load_failed(pid, found.distribution, found.version, f"import failed: {exc!r}")
                continue
            try:
                loaded.append(
                    self.register(
                        obj,
                        pid,
                        bundled=False,
                        distribution=found.distribution,
                        version=found.version,
                        source=found.value,
                    )
                )
            except PluginLoadError as exc:
                self._load_failed(pid, found.distribution, found.version, exc.cause)
        return loaded

    def _load_failed(
        self, plugin_id: str, distribution: str | None, version: str | None, cause: str
    ) -> None:
        error = PluginLoadError(plugin_id, cause)
        self.load_errors.append(error)
        self.failed_plugins.append(
            PluginRecord(
                plugin_id=plugin_id,
                bundled=False,
                distribution=distribution,
                version=version,
                error=cause,
            )
        )
        log.error("%s (the other plugins still load)", error)

    def unregister(self, plugin_id: str) -> None:
        """Remove a plugin and all its handlers."""
        if plugin_id not in self._records:
            raise KeyError(f"no plugin {plugin_id!r} is registered")
        self._forget(plugin_id)

    def _forget(self, plugin_id: str) -> None:
        for name, owner in list(self._owners.items()):
            if owner.plugin_id == plugin_id:
                self._pm.unregister(name=name)
                del self._owners[name]
        self._records.pop(plugin_id, None)
        self._contexts.pop(plugin_id, None)
        self._plans.clear()

    def _register_object(
        self,
        obj: object,
        record: PluginRecord,
        *,
        options: HandlerOptions | None = None,
        is_async: bool | None = None,
    ) -> None:
        pid = record.plugin_id
        existing = self._pm.get_name(obj)
        if existing is not None:
            owner = self._owners.get(existing)
            raise DuplicatePluginError(
                pid,
                f"this object is already registered as plugin "
                f"{owner.plugin_id if owner else existing!r} (a module or object can be "
                "registered once; unregister it first or register another instance)",
            )
        self._seq += 1
        name = pid if isinstance(obj, ModuleType) or options is None else f"{pid}#{self._seq}"
        if name in self._owners:
            name = f"{pid}#{self._seq}"
        try:
            self._pm.register(obj, name=name)
        except pluggy.PluginValidationError as exc:
            raise HookSignatureError(pid, _signature_message(str(exc))) from None
        except ValueError as exc:
            raise PluginLoadError(pid, str(exc)) from None
        self._owners[name] = _Owner(pid, self._seq, options, is_async)
        callers = self._pm.get_hookcallers(obj) or []
        for caller in callers:
            impl = next(i for i in caller.get_hookimpls() if i.plugin is obj)
            problem = None
            if impl.hookwrapper or impl.wrapper:
                problem = (
                    f"hook {caller.name!r}: pluggy wrappers are not supported; write an "
                    "ordinary handler and use priority to run early"
                )
            elif not caller.has_spec() and not impl.optionalhook:
                problem = self._unknown_hook_message(caller.name)
            if problem is not None:
                self._pm.unregister(name=name)
                del self._owners[name]
                raise UnknownHookError(pid, problem)
        for caller in callers:
            if caller.has_spec():
                self._note_hook(record, caller.name)
        self._plans.clear()

    def _note_hook(self, record: PluginRecord, hook: str) -> None:
        decl = self._decls[hook]
        gate = self._gate(decl, record.plugin_id)
        # A gated hook is refused: it is listed apart and its handlers only appear in
        # dispatch traces as ``blocked-by-gate`` (never run).
        listed = record.refused_hooks if gate is not None else record.hooks
        if hook not in listed:
            listed.append(hook)
        if decl.deprecation is not None:
            self._warn_once(
                record,
                hook,
                f"plugin {record.plugin_id!r} uses deprecated hook {hook!r}; "
                f"use {decl.deprecation.replacement} instead",
            )
        if gate is not None:
            self._warn_once(record, "gate:" + hook, gate, category=None)
        if decl.kind is HookKind.SYNC:
            for impl in getattr(self._pm.hook, hook).get_hookimpls():
                owner = self._owners[impl.plugin_name]
                if owner.plugin_id == record.plugin_id and (
                    owner.is_async or inspect.iscoroutinefunction(impl.function)
                ):
                    self._warn_once(
                        record,
                        "async:" + hook,
                        f"plugin {record.plugin_id!r}: hook {hook!r} is synchronous; the "
                        "async handler is ignored (make it a plain function)",
                        category=None,
                    )

    # -- plans ------------------------------------------------------------------------

    def _handler_context(self, plugin_id: str) -> HandlerContext:
        context = self._contexts.get(plugin_id)
        if context is None:
            raw = self.config.entry(plugin_id).config
            context = HandlerContext(plugin_id=plugin_id, plugin_config=deep_freeze(raw))
            self._contexts[plugin_id] = context
        return context

    def _gate(self, decl: HookDecl, plugin_id: str) -> str | None:
        settings = self.config.entry(plugin_id).hooks
        if decl.conversation_gate:
            allowed = settings.allow_conversation_access
            bundled = self._bundled.get(plugin_id, True)
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

    def _timeout(
        self, decl: HookDecl, canonical: str, plugin_id: str, options: HandlerOptions
    ) -> tuple[float | None, str]:
        if decl.kind is HookKind.SYNC:
            return None, "sync hook (no timeout)"
        settings = self.config.entry(plugin_id).hooks
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
        return self.config.runtime.default_timeout_ms / 1000, "runtime.default_timeout_ms"

    def plan(self, hook: str) -> tuple[Handler, ...]:
        """The ordered handlers of ``hook`` (descending priority, stable ties)."""
        plan = self._plans.get(hook)
        if plan is None:
            plan = self._build_plan(hook)
        return plan

    def _build_plan(self, hook: str) -> tuple[Handler, ...]:
        self._decl(hook)  # raises a clear LookupError for unknown hooks
        names = [hook] + [
            d.name
            for d in self._decls.values()
            if d.deprecation is not None and d.deprecation.alias_of == hook
        ]
        handlers: list[Handler] = []
        for name in names:
            caller = getattr(self._pm.hook, name, None)
            if caller is None:
                continue
            own_decl = self._decls[name]
            for impl in caller.get_hookimpls():
                owner = self._owners[impl.plugin_name]
                options = owner.options or options_of(impl.function)
                timeout_s, timeout_source = self._timeout(own_decl, hook, owner.plugin_id, options)
                is_async = (
                    owner.is_async
                    if owner.is_async is not None
                    else inspect.iscoroutinefunction(impl.function)
                )
                handlers.append(
                    Handler(
                        plugin_id=owner.plugin_id,
                        hook=name,
                        function=impl.function,
                        call_mode=_call_mode(tuple(impl.argnames)),
                        priority=options.priority,
                        seq=owner.seq,
                        timeout_s=timeout_s,
                        timeout_source=timeout_source,
                        context=self._handler_context(owner.plugin_id),
                        thread=options.thread and not is_async,
                        gate=self._gate(own_decl, owner.plugin_id),
                        is_async=is_async,
                    )
                )
        handlers.sort(key=lambda h: (-h.priority, h.seq))
        plan = tuple(handlers)
        self._plans[hook] = plan
        return plan

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
            run = _SequentialRun(decl, plan, reducer, cx, self.timings)
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
_SEQUENTIAL = frozenset({HookKind.DECIDE, HookKind.PIPELINE, HookKind.MERGE, HookKind.CLAIM})


def _no_preference(plugin_id: str) -> None:
    return None


def _default_id(plugin: object) -> str:
    for attr in ("plugin_id", "PLUGIN_ID"):
        value = getattr(plugin, attr, None)
        if isinstance(value, str) and value:
            return value
    name = getattr(plugin, "__name__", None) or type(plugin).__name__
    return str(name).rsplit(".", 1)[-1]


def _has_hookimpls(plugin: object) -> bool:
    for attr in dir(plugin):
        if attr.startswith("__"):
            continue
        try:
            value = getattr(plugin, attr)
        except Exception:
            continue
        if getattr(value, f"{PROJECT_NAME}_impl", None) is not None:
            return True
    return False


def _register_callable(plugin: object) -> Callable[[PluginApi], Any] | None:
    register = getattr(plugin, "register", None)
    if callable(register):
        return register  # type: ignore[no-any-return]
    if inspect.isfunction(plugin):
        return plugin  # a bare ``register(api)`` function as the entry point
    return None


def _signature_message(text: str) -> str:
    return (
        f"{text.strip()} - hook implementations take a subset of the hookspec's arguments "
        "(`event`, `ctx`)"
    )
