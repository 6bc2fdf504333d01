"""``HookHost``: the hook runtime. Registers plugins, builds ordered handler plans,
dispatches hooks; knows no store, session, policy, action or plugin source.

The host programs use, :class:`agentplug.PluginHost`, is this class plus what a
:class:`~agentplug.Gateway` attaches (the framework's outcome filters and the full plugin
API); the core's own tests and tools can use :class:`HookHost` alone.
"""

from __future__ import annotations

import inspect
import logging
import warnings
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pluggy
from agentplug_hookspecs import (
    PROJECT_NAME,
    HandlerContext,
    HookDecl,
    HookKind,
    builtin_declarations,
    declarations_in,
    deep_freeze,
)

from agentplug.config.model import AgentplugConfig
from agentplug.config.suggest import did_you_mean
from agentplug.core.dispatcher import HookDispatcher
from agentplug.core.errors import (
    AgentplugError,
    DuplicatePluginError,
    HookSignatureError,
    PluginLoadError,
    UnknownHookError,
    load_error_line,
    printable,
)
from agentplug.core.facade import HookFacade
from agentplug.core.markers import HandlerOptions, check_timeout_ms
from agentplug.core.overruns import remember_overrun
from agentplug.core.plans import HookPlan, compile_plan, gate_reason
from agentplug.core.records import HandlerOwner, PluginRecord
from agentplug.core.reducers import reducer_for
from agentplug.core.registration import (
    HookRelayManager,
    OnHandler,
    default_id,
    display_metadata,
    has_async_handler,
    has_hookimpls,
    positional_wrapper,
    register_callable,
    signature_message,
)
from agentplug.core.results import (
    Handler,
)
from agentplug.core.sync import SyncHost

__all__ = ["ApiFactory", "HookApi", "HookHost", "PluginRecord"]

log = logging.getLogger("agentplug.host")
MAX_NOTE_CHARS = 300
"""Longest ``api.note`` line kept."""


class HookApi:
    """What ``register(api)`` receives from a bare :class:`HookHost`: hook registration.

    A gateway's host hands plugins the full :class:`agentplug.PluginApi` (sessions,
    trusted tool policies, actions), a subclass of this one.
    """

    def __init__(self, host: HookHost, record: PluginRecord) -> None:
        self._host = host
        self._record = record
        self.plugin_id = record.plugin_id
        """This plugin's id."""
        self.logger = logging.getLogger(f"agentplug.plugin.{record.plugin_id}")
        """A logger named after the plugin."""

    @property
    def plugin_config(self) -> Mapping[str, Any]:
        """The resolved ``plugins.entries.<id>.config`` (read-only)."""
        return self._host.handler_context(self.plugin_id).plugin_config

    @property
    def record(self) -> PluginRecord:
        """This plugin's record (hooks, warnings, metadata)."""
        return self._record

    @property
    def host(self) -> HookHost:
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
        if hook not in self._host.declarations:
            if optional:
                return
            raise UnknownHookError(self.plugin_id, self._host._unknown_hook_message(hook))
        is_async = inspect.iscoroutinefunction(handler)
        try:
            adapted = positional_wrapper(handler)
        except TypeError as exc:
            raise HookSignatureError(self.plugin_id, f"api.on({hook!r}): {exc}") from None
        self._host._register_object(
            OnHandler(hook, adapted),
            self._record,
            options=options,
            is_async=is_async,
        )

    def add_hookspecs(self, namespace: ModuleType | type | object) -> list[str]:
        """Add hookspecs declared with ``agentplug_hookspecs.declare`` (extensions)."""
        return self._host.add_hookspecs(namespace)

    def hook_allowed(self, hook: str) -> bool:
        """Whether the operator's gates let this plugin run ``hook`` (register only what
        will run, and stay quiet about the rest)."""
        decl = self._host.declarations.get(hook)
        return decl is not None and self._host._gate(decl, self.plugin_id) is None

    def note(self, text: str) -> None:
        """Tell the operator, in one line, what this plugin does beyond its hooks (a file
        it writes): ``agentplug chat``, ``plugins`` and ``doctor`` show it."""
        line = " ".join(printable(str(text)).split())[:MAX_NOTE_CHARS]
        if line and line not in self._record.notes:
            self._record.notes.append(line)

    def warn_deprecated(self, old: str, new: str) -> None:
        """Warn once that this plugin uses ``old``, naming ``new``."""
        message = f"plugin {self.plugin_id!r} uses deprecated {old}; use {new} instead"
        self._host.warn_once(self._record, old, message)

    def __getattr__(self, name: str) -> Any:
        if name in _GATEWAY_API:
            raise AttributeError(
                f"plugin {self.plugin_id!r}: api.{name} needs the gateway's services; load "
                "the plugin through a gateway (agentplug.Gateway.from_config(...), or "
                "agentplug.PluginHost), not a bare HookHost"
            )
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


_GATEWAY_API = frozenset(
    {
        "session",
        "actions",
        "register_trusted_tool_policy",
        "register_session_extension",
        "enqueue_next_turn_injection",
    }
)

ApiFactory = Callable[["HookHost", PluginRecord], HookApi]
"""Builds what ``register(api)`` receives (a gateway passes the full plugin API)."""


class HookHost(HookDispatcher):
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
        api_factory: ApiFactory | None = None,
    ) -> None:
        super().__init__(
            config if isinstance(config, AgentplugConfig) else AgentplugConfig.parse(config)
        )
        self._api_factory: ApiFactory = api_factory or HookApi
        self._pm = HookRelayManager(PROJECT_NAME)
        self._records: dict[str, PluginRecord] = {}
        self._objects: dict[str, object] = {}
        self._owners: dict[str, HandlerOwner] = {}
        self._hookspec_sources: set[str] = set()
        self._contexts: dict[str, HandlerContext] = {}
        self._bundled: dict[str, bool] = {}
        self._seq = 0
        self._warned: set[tuple[str, str]] = set()
        self._sync: SyncHost | None = None
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
        self.tracker.on_overrun = self._note_overrun

    @property
    def sync(self) -> SyncHost:
        """The blocking facade (created on first use; owns a private event loop)."""
        if self._sync is None:
            self._sync = SyncHost(self)
        return self._sync

    def warn_once(
        self,
        record: PluginRecord,
        key: str,
        message: str,
        *,
        category: type[Warning] | None = DeprecationWarning,
    ) -> None:
        """Record and log ``message`` once per plugin and ``key`` (and warn if a category).

        Services use it for their own per-plugin notices (a deprecated field, ...).
        """
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
        hint = did_you_mean(hook, self._decls)
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
        called with what ``api_factory`` builds (a :class:`HookApi` by default). Raises
        :class:`PluginLoadError` (naming the plugin and the cause) and leaves nothing
        half-registered on failure.
        """
        pid = plugin_id or default_id(plugin)
        if pid in self._records:
            raise DuplicatePluginError(pid, "a plugin with this id is already registered")
        if inspect.isclass(plugin):
            try:
                plugin = plugin()
            except Exception as exc:
                raise PluginLoadError(pid, f"could not instantiate {exc!r}") from exc
        name, description = display_metadata(plugin)
        record = PluginRecord(
            plugin_id=pid,
            bundled=bundled,
            name=name,
            description=description,
            distribution=distribution,
            version=version,
            source=source or getattr(plugin, "__name__", type(plugin).__qualname__),
        )
        self._records[pid] = record
        self._objects[pid] = plugin
        self._bundled[pid] = bundled
        try:
            if has_hookimpls(plugin):
                self._register_object(plugin, record)
            register = register_callable(plugin)
            if register is not None:
                returned = register(self._api_factory(self, record))
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

    def record(self, plugin_id: str) -> PluginRecord | None:
        """The record of the registered plugin ``plugin_id`` (``None`` when unknown)."""
        return self._records.get(plugin_id)

    def plugin_object(self, plugin_id: str) -> object | None:
        """The registered plugin object (module, instance or function) of ``plugin_id``."""
        return self._objects.get(plugin_id)

    def load_installed(
        self,
        *,
        use_cache: bool = True,
        cache_dir: Path | None = None,
        before_import: Callable[[str], object] | None = None,
    ) -> list[PluginRecord]:
        """Discover and register installed plugins (entry-point group ``agentplug``).

        Third-party hookspecs (group ``agentplug.hookspecs``) load first. Config filters
        (``plugins.enabled``, ``allow``, ``deny``, ``entries.<id>.enabled``) apply before
        any plugin code is imported. A plugin that fails (import error, bad signature,
        unknown hook, failing ``register``) is recorded in :attr:`load_errors` with its
        id and cause; the others still load (``$AGENTPLUG_DISABLE_PLUGINS`` loads none).
        ``before_import(plugin_id)`` runs before a plugin's code is imported (a gateway's
        plugin sources put an ejected copy first)."""
        from agentplug.core import loader
        from agentplug.core.loader import ENTRY_POINT_GROUP, HOOKSPEC_GROUP, discover

        if loader.installed_plugins_disabled():  # the one switch: $AGENTPLUG_DISABLE_PLUGINS
            return []
        for spec in discover(HOOKSPEC_GROUP, use_cache=use_cache, cache_dir=cache_dir):
            if spec.name in self._hookspec_sources:
                continue  # a reload: these hooks are declared already
            try:
                self.add_hookspecs(spec.load())
                self._hookspec_sources.add(spec.name)
            except Exception as exc:
                self._load_failed(
                    spec.name, spec.distribution, spec.version, f"hookspecs: {exc!r}", exc
                )
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
            if before_import is not None:
                before_import(pid)
            try:
                obj = found.load()
            except Exception as exc:
                cause = f"import failed: {exc!r}"
                self._load_failed(pid, found.distribution, found.version, cause, exc)
                continue
            try:
                record = self.register(
                    obj,
                    pid,
                    bundled=False,
                    distribution=found.distribution,
                    version=found.version,
                    source=found.value,
                )
            except PluginLoadError as exc:
                self._load_failed(pid, found.distribution, found.version, exc.cause, exc)
                continue
            record.description = record.description or found.summary
            loaded.append(record)
        return loaded

    def _load_failed(
        self,
        plugin_id: str,
        distribution: str | None,
        version: str | None,
        cause: str,
        exc: BaseException | None = None,
    ) -> None:
        error = PluginLoadError(plugin_id, cause)
        # The original exception, for tools that show the traceback (``agentplug -v``).
        error.__cause__ = exc.__cause__ if isinstance(exc, PluginLoadError) else exc
        self.load_errors.append(error)
        failed = {"distribution": distribution, "version": version, "error": cause}
        self.failed_plugins.append(PluginRecord(plugin_id=plugin_id, bundled=False, **failed))
        # Commands report load errors themselves (one line with the place); the log record
        # says so, so that the command line does not print the error twice.
        log.error(
            "%s (the other plugins still load)",
            load_error_line(error),
            extra={"agentplug_load_error": True},
        )

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
        self._objects.pop(plugin_id, None)
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
            raise HookSignatureError(pid, signature_message(str(exc))) from None
        except ValueError as exc:
            raise PluginLoadError(pid, str(exc)) from None
        self._owners[name] = HandlerOwner(pid, self._seq, options, is_async)
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
            self.warn_once(
                record,
                hook,
                f"plugin {record.plugin_id!r} uses deprecated hook {hook!r}: "
                f"{decl.deprecation.notice()}",
            )
        if gate is not None:
            self.warn_once(record, "gate:" + hook, gate, category=None)
        relay = getattr(self._pm.hook, hook)
        if decl.kind is HookKind.SYNC and has_async_handler(relay, self._owners, record.plugin_id):
            self.warn_once(
                record,
                "async:" + hook,
                f"plugin {record.plugin_id!r}: hook {hook!r} is synchronous; the "
                "async handler is ignored (make it a plain function)",
                category=None,
            )

    # -- plans ------------------------------------------------------------------------

    def handler_context(self, plugin_id: str) -> HandlerContext:
        """What ``plugin_id``'s handlers see as ``event.context`` (its resolved config)."""
        context = self._contexts.get(plugin_id)
        if context is None:
            raw = self.config.entry(plugin_id).config
            context = HandlerContext(plugin_id=plugin_id, plugin_config=deep_freeze(raw))
            self._contexts[plugin_id] = context
        return context

    def _gate(self, decl: HookDecl, plugin_id: str) -> str | None:
        # Why the operator's gates refuse ``plugin_id`` on ``decl`` (``None``: allowed).
        return gate_reason(self.config, decl, plugin_id, self._bundled.get(plugin_id, True))

    def _build_plan(self, hook: str) -> HookPlan:
        decl = self._decl(hook)  # raises a clear LookupError for unknown hooks
        handlers = compile_plan(
            hook,
            self._decls,
            self._pm.hook,
            self._owners,
            self.config,
            self._bundled,
            self.handler_context,
        )
        plan = HookPlan(decl, handlers, self._reducers[hook])
        self._plans[hook] = plan
        return plan

    def plan(self, hook: str) -> tuple[Handler, ...]:
        """The ordered handlers of ``hook`` (descending priority, stable ties)."""
        plan = self._plans.get(hook)
        if plan is None:
            plan = self._build_plan(hook)
        return plan.handlers

    def _note_overrun(self, handler: Handler, elapsed_s: float) -> None:
        """A handler was first seen blocking the event loop past its budget: say so on its
        plugin's record (``agentplug plugins`` and ``doctor`` show it) and remember it."""
        record = self._records.get(handler.plugin_id)
        message = (
            f"handler {handler.hook!r} blocked the event loop for {elapsed_s * 1000:.0f} ms "
            f"(budget {handler.budget * 1000:.0f} ms); run blocking code with thread=True "
            "or make it async"
        )
        if record is not None:
            self.warn_once(record, "overrun:" + handler.hook, message, category=None)
        remember_overrun(handler.plugin_id, handler.hook, elapsed_s, handler.budget)


# Transitional name inside the framework (the public agentplug.PluginHost is the gateway's).
PluginHost = HookHost
