"""pytest plugin: fixtures for testing agentplug plugins, and scenario files as tests.

Installed with the distribution as the ``pytest11`` entry point ``agentplug``; opt out
with ``pytest -p no:agentplug``. See ``docs/testing.md``.

Fixtures (function scope):

``agentplug_config``
    The operator config (a dict) of ``agentplug_host``. Override the fixture in a test
    module or ``conftest.py``, or use ``@pytest.mark.agentplug_config({...})`` (applied on
    top of the fixture value; the closest marker wins, dicts are merged deeply).
``agentplug_host``
    An isolated :class:`~agentplug.PluginHost` built from that config. No installed plugin
    (entry point) is loaded unless the test is marked ``@pytest.mark.agentplug_entry_points``
    (every installed plugin, with the config's filters) or
    ``@pytest.mark.agentplug_entry_points("name", ...)`` (just those), or loads one with
    ``agentplug_load``.
``agentplug_load``
    ``agentplug_load(target, plugin_id=None, *, bundled=None)`` registers a plugin object,
    a ``"package.module"`` / ``"package.module:attr"`` path, or an installed entry point
    by name on ``agentplug_host``.
``agentplug_dispatch``
    ``agentplug_dispatch(hook, event=None, ctx=None)`` runs one dispatch from a plain
    (non-async) test, like ``asyncio.run`` but on one event loop per test.
``agentplug_recorder``
    Records every dispatch of ``agentplug_host`` (hook, event, ctx, outcome, handler
    reports). It wraps the host *instance's* ``dispatch`` and ``call_sync`` methods for the
    duration of the test (the class is untouched).
``agentplug_approvals``
    A scriptable approval resolver (``.script("web_search", "allow-once")``) with an
    :class:`~agentplug.services.approvals.ApprovalBroker` wired to it (``.broker``) and
    ``.tool_call(...)`` to run ``before_tool_call`` plus the approval round-trip.

Scenario files named ``scenario_*.json`` (ini option ``agentplug_scenarios``) are
collected as one test item per file; steps may carry ``expect``, ``expect_handlers`` and
``expect_approval`` (checked by :mod:`agentplug.testing.scenario_check`, as ``agentplug run``
does). ``AGENTPLUG_PYTEST_DISABLE=1`` or ``agentplug_disable = true`` turns scenario
collection off.

This module imports nothing from the agentplug runtime at import time: pytest loads it
in every session of an environment where agentplug is installed.
"""

from __future__ import annotations

import copy
import os
import re
import warnings
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, TypeVar, cast

import pytest

T = TypeVar("T")

if TYPE_CHECKING:
    import asyncio

    from _pytest._code.code import TerminalRepr
    from agentplug_hookspecs import HookDecl
    from agentplug_hookspecs.tools import ToolCallOutcome

    from agentplug.core.dispatch import DispatchResult, HandlerReport
    from agentplug.core.host import PluginHost, PluginRecord
    from agentplug.core.loader import DiscoveredPlugin
    from agentplug.services.approvals import ApprovalBroker, ApprovalVerdict, PendingApproval
    from agentplug.testing.scenario_check import CheckedScenario

__all__ = [
    "DISABLE_ENV",
    "AgentplugPytestWarning",
    "ApprovalScript",
    "DispatchRecord",
    "DispatchRecorder",
    "Dispatcher",
    "PluginLoader",
    "ScenarioFailure",
    "ScenarioFile",
    "ScenarioItem",
    "ToolCallCheck",
]

DISABLE_ENV: Final = "AGENTPLUG_PYTEST_DISABLE"
"""Environment variable: a true value (``1``, ``true``, ``yes``, ``on``) skips scenario files."""
DEFAULT_SCENARIO_GLOBS: Final = ("scenario_*.json",)
_TRUE: Final = frozenset({"1", "true", "yes", "on"})
_DECISIONS: Final = ("allow-once", "allow-always", "deny")

Decision = Literal["allow-once", "allow-always", "deny"]


class AgentplugPytestWarning(pytest.PytestWarning):
    """A test left something behind (unscripted approval, handler still running)."""


# -- pytest hooks ----------------------------------------------------------------------


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini(
        "agentplug_scenarios",
        type="args",
        default=list(DEFAULT_SCENARIO_GLOBS),
        help="agentplug: glob(s) of scenario files collected as tests "
        "(matched against the end of the path; default scenario_*.json)",
    )
    parser.addini(
        "agentplug_disable",
        type="bool",
        default=False,
        help=f"agentplug: do not collect scenario files (also: {DISABLE_ENV}=1)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "agentplug_config(config=None, **keys): agentplug operator config for the "
        "agentplug_host fixture, merged (deeply) over the agentplug_config fixture",
    )
    config.addinivalue_line(
        "markers",
        "agentplug_plugin_config(plugin_id, config): shortcut for "
        "agentplug_config({'plugins': {'entries': {plugin_id: {'config': config}}}})",
    )
    config.addinivalue_line(
        "markers",
        "agentplug_entry_points(*names): let agentplug_host load installed plugins: "
        "all of them (config filters apply) or only the named entry points",
    )


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> ScenarioFile | None:
    config = parent.config
    globs: list[str] = config.getini("agentplug_scenarios") or list(DEFAULT_SCENARIO_GLOBS)
    if not any(file_path.match(pattern) for pattern in globs):
        return None
    if scenarios_disabled(config):
        return None
    return ScenarioFile.from_parent(parent, path=file_path)


def scenarios_disabled(config: pytest.Config) -> bool:
    """True when ``AGENTPLUG_PYTEST_DISABLE`` or the ini option ``agentplug_disable`` is set."""
    if os.environ.get(DISABLE_ENV, "").strip().lower() in _TRUE:
        return True
    return bool(config.getini("agentplug_disable"))


# -- config ----------------------------------------------------------------------------


def _deep_merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        current = merged.get(key)
        if isinstance(current, Mapping) and isinstance(value, Mapping):
            merged[key] = _deep_merge(current, value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _marker_config(marker: pytest.Mark) -> dict[str, Any]:
    if len(marker.args) > 1 or (marker.args and not isinstance(marker.args[0], Mapping)):
        pytest.fail(
            "@pytest.mark.agentplug_config takes one dict (and/or keyword arguments), "
            f"got {marker.args!r}",
            pytrace=False,
        )
    data: dict[str, Any] = dict(marker.args[0]) if marker.args else {}
    data.update(marker.kwargs)
    return data


def _plugin_marker_config(marker: pytest.Mark) -> dict[str, Any]:
    if (
        len(marker.args) != 2
        or not isinstance(marker.args[0], str)
        or not isinstance(marker.args[1], Mapping)
    ):
        pytest.fail(
            "@pytest.mark.agentplug_plugin_config takes a plugin id and a dict, "
            f"got {marker.args!r}",
            pytrace=False,
        )
    plugin_id, config = marker.args
    return {"plugins": {"entries": {plugin_id: {"config": dict(config)}}}}


def _with_markers(base: Mapping[str, Any], node: pytest.Item | pytest.Collector) -> dict[str, Any]:
    result = copy.deepcopy(dict(base))
    # iter_markers yields the closest marker first; merge the farthest first.
    for marker in reversed(list(node.iter_markers("agentplug_config"))):
        result = _deep_merge(result, _marker_config(marker))
    for marker in reversed(list(node.iter_markers("agentplug_plugin_config"))):
        result = _deep_merge(result, _plugin_marker_config(marker))
    return result


def _config_mapping(value: object) -> Mapping[str, Any]:
    if isinstance(value, Mapping):
        return value
    dump = getattr(value, "model_dump", None)  # an AgentplugConfig
    if callable(dump):
        return cast("Mapping[str, Any]", dump())
    if value is None:
        return {}
    raise TypeError(f"agentplug_config must be a dict, got {type(value).__name__}")


# -- per-test state --------------------------------------------------------------------


class _TestState:
    """What the fixtures of one test share: the host and (lazily) an event loop."""

    def __init__(self, host: PluginHost) -> None:
        self.host = host
        self._runner: asyncio.Runner | None = None
        self._hookspecs_loaded = False

    def run(self, coro: Any) -> Any:
        import asyncio

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            pass
        else:
            coro.close()
            raise RuntimeError(
                "agentplug's sync helpers cannot run inside a running event loop; in an "
                "async test use `await agentplug_host.dispatch(...)` (or the async helper)"
            )
        if self._runner is None:
            self._runner = asyncio.Runner()
        return self._runner.run(coro)

    def ensure_hookspecs(self) -> None:
        """Add installed third-party hookspecs (group ``agentplug.hookspecs``) once."""
        if self._hookspecs_loaded:
            return
        self._hookspecs_loaded = True
        from agentplug.core.loader import HOOKSPEC_GROUP, discover

        for spec in discover(HOOKSPEC_GROUP, use_cache=False):
            try:
                module = spec.load()
                if not any(d.name in self.host.declarations for d in _declarations_of(module)):
                    self.host.add_hookspecs(module)
            except Exception as exc:  # an unrelated broken package must not fail the test
                warnings.warn(
                    f"agentplug hookspecs {spec.name!r} ({spec.value}) could not be added: {exc!r}",
                    AgentplugPytestWarning,
                    stacklevel=1,
                )

    def close(self) -> None:
        host = self.host
        leftover: list[str]
        if self._runner is not None:
            budget = host.config.runtime.shutdown_timeout_ms / 1000
            try:
                leftover = self._runner.run(host.aclose(budget))
            finally:
                self._runner.close()
                self._runner = None
        else:
            leftover = host.tracker.pending
        for label in leftover:
            warnings.warn(
                f"agentplug handler {label} was still running when the test ended "
                "(it outlived its timeout); in async tests `await agentplug_host.aclose()` "
                "to wait for it",
                AgentplugPytestWarning,
                stacklevel=1,
            )


def _declarations_of(module: object) -> list[HookDecl]:
    from agentplug_hookspecs import declarations_in

    return list(declarations_in(module))


_STATE_KEY = pytest.StashKey[_TestState]()


def _state(request: pytest.FixtureRequest, host: PluginHost) -> _TestState:
    stash: pytest.Stash = request.node.stash
    state: _TestState | None = stash.get(_STATE_KEY, None)
    if state is None or state.host is not host:
        state = _TestState(host)
        stash[_STATE_KEY] = state
        request.addfinalizer(state.close)
    return state


# -- loading plugins -------------------------------------------------------------------


class PluginLoader:
    """``agentplug_load(target, plugin_id=None, *, bundled=None)``.

    ``target`` is a plugin object (module, class, instance, ``register(api)`` function),
    a module path (``"module:pkg.mod"``, ``"pkg.mod:attr"`` or ``"pkg.mod"``), or the name
    of an installed entry point (group ``agentplug``). Objects and module paths register
    as bundled (``bundled=True``) unless told otherwise; entry points as installed
    (``bundled=False``), like ``PluginHost.load_installed``.
    """

    def __init__(self, state: _TestState) -> None:
        self._state = state
        self._installed: dict[str, DiscoveredPlugin] | None = None

    @property
    def host(self) -> PluginHost:
        return self._state.host

    def installed(self) -> dict[str, DiscoveredPlugin]:
        """Installed entry points of group ``agentplug`` by name (nothing imported)."""
        if self._installed is None:
            from agentplug.core.loader import ENTRY_POINT_GROUP, discover

            self._installed = {p.name: p for p in discover(ENTRY_POINT_GROUP, use_cache=False)}
        return self._installed

    def __call__(
        self, target: object, plugin_id: str | None = None, *, bundled: bool | None = None
    ) -> PluginRecord:
        if not isinstance(target, str):
            return self.host.register(
                target, plugin_id, bundled=True if bundled is None else bundled
            )
        if target.startswith("module:"):
            return self.module(target[len("module:") :], plugin_id, bundled=bundled)
        if ":" not in target and target in self.installed():
            return self.entry_point(target, plugin_id, bundled=bundled)
        if ":" in target or _importable(target):
            return self.module(target, plugin_id, bundled=bundled)
        return self.entry_point(target, plugin_id, bundled=bundled)  # raises: names them

    def module(
        self, path: str, plugin_id: str | None = None, *, bundled: bool | None = None
    ) -> PluginRecord:
        """Import ``pkg.mod`` or ``pkg.mod:attr`` and register it."""
        import importlib

        from agentplug.core.errors import PluginLoadError

        module_name, _, attr = path.partition(":")
        pid = plugin_id or module_name.rsplit(".", 1)[-1]
        try:
            obj: object = importlib.import_module(module_name)
            for part in filter(None, attr.split(".")):
                obj = getattr(obj, part)
        except Exception as exc:
            raise PluginLoadError(pid, f"cannot import {path!r}: {exc!r}") from exc
        if plugin_id is None:
            own = getattr(obj, "plugin_id", None) or getattr(obj, "PLUGIN_ID", None)
            if isinstance(own, str) and own:
                pid = own
        return self.host.register(
            obj, pid, bundled=True if bundled is None else bundled, source=path
        )

    def entry_point(
        self, name: str, plugin_id: str | None = None, *, bundled: bool | None = None
    ) -> PluginRecord:
        """Load the installed plugin ``name`` (entry-point group ``agentplug``)."""
        from agentplug.core.errors import PluginLoadError

        found = self.installed().get(name)
        if found is None:
            known = ", ".join(sorted(self.installed())) or "none"
            raise PluginLoadError(
                name,
                f"no installed plugin with entry point {name!r} in group 'agentplug' "
                f"(installed: {known}); pip install it, or pass an object or "
                "'package.module' path to agentplug_load",
            )
        self._state.ensure_hookspecs()
        try:
            obj = found.load()
        except Exception as exc:
            raise PluginLoadError(name, f"import failed: {exc!r}") from exc
        return self.host.register(
            obj,
            plugin_id or name,
            bundled=bool(bundled),
            distribution=found.distribution,
            version=found.version,
            source=found.value,
        )


def _importable(name: str) -> bool:
    import importlib.util

    if not re.fullmatch(r"[A-Za-z_][\w.]*", name):
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


# -- dispatching and recording ---------------------------------------------------------


class Dispatcher:
    """``agentplug_dispatch(hook, event=None, ctx=None)``: a blocking dispatch.

    Sync hooks run directly (``call_sync``); the others run on an event loop kept for
    the whole test, so a handler that outlives its timeout keeps running until the
    test ends, when the fixture waits for it (``runtime.shutdown_timeout_ms``).
    """

    def __init__(self, state: _TestState) -> None:
        self._state = state

    def __call__(self, hook: str, event: Any = None, ctx: Any = None) -> DispatchResult[Any]:
        host = self._state.host
        decl = host.declarations.get(hook)
        if decl is not None and decl.kind.value == "sync":
            return host.call_sync(hook, event, ctx)
        result: DispatchResult[Any] = self._state.run(host.dispatch(hook, event, ctx))
        return result


def _as_dict(value: object) -> dict[str, Any]:
    if value is None:
        return {}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return cast("dict[str, Any]", dump())
    if isinstance(value, Mapping):
        return dict(value)
    return {"value": value}


@dataclass(frozen=True)
class DispatchRecord:
    """One recorded dispatch."""

    hook: str
    """The hook name the host was asked to dispatch."""
    event: dict[str, Any]
    """The event as passed (a model is dumped to a dict)."""
    ctx: dict[str, Any]
    """The context as passed (``{}`` when none was)."""
    via: Literal["dispatch", "call_sync"]
    result: DispatchResult[Any] | None = None
    error: BaseException | None = None
    """What the dispatch raised (unknown hook, invalid event), if it raised."""

    def _result(self) -> DispatchResult[Any]:
        if self.result is None:
            raise LookupError(f"dispatch of {self.hook!r} raised {self.error!r}; no outcome")
        return self.result

    @property
    def outcome(self) -> Any:
        """The reduced outcome model."""
        return self._result().outcome

    @property
    def outcome_data(self) -> dict[str, Any]:
        """``outcome.model_dump(mode="json")``."""
        return cast("dict[str, Any]", self._result().outcome.model_dump(mode="json"))

    @property
    def handlers(self) -> list[HandlerReport]:
        """Per-handler reports in execution order (empty when the dispatch raised)."""
        return self.result.handlers if self.result is not None else []

    @property
    def statuses(self) -> dict[str, str]:
        """``{plugin_id: status}`` (a plugin's first handler when it has several)."""
        found: dict[str, str] = {}
        for report in self.handlers:
            found.setdefault(report.plugin_id, report.status.value)
        return found


class DispatchRecorder:
    """``agentplug_recorder``: every dispatch of ``agentplug_host`` in order."""

    def __init__(self, host: PluginHost) -> None:
        self.host = host
        self.records: list[DispatchRecord] = []
        self._saved: dict[str, object] = {}

    # installation on the host instance ------------------------------------------------

    def install(self) -> None:
        """Wrap ``host.dispatch`` and ``host.call_sync`` on the instance."""
        if self._saved:
            return
        host = self.host
        attrs = vars(host)
        self._saved = {name: attrs.get(name, _ABSENT) for name in ("dispatch", "call_sync")}
        inner_dispatch = host.dispatch
        inner_call_sync = host.call_sync
        add = self._add

        async def dispatch(hook: str, event: Any = None, ctx: Any = None) -> DispatchResult[Any]:
            try:
                result = await inner_dispatch(hook, event, ctx)
            except Exception as exc:
                add(hook, event, ctx, "dispatch", None, exc)
                raise
            add(hook, event, ctx, "dispatch", result, None)
            return result

        def call_sync(hook: str, event: Any = None, ctx: Any = None) -> DispatchResult[Any]:
            try:
                result = inner_call_sync(hook, event, ctx)
            except Exception as exc:
                add(hook, event, ctx, "call_sync", None, exc)
                raise
            add(hook, event, ctx, "call_sync", result, None)
            return result

        host.dispatch = dispatch  # type: ignore[method-assign]
        host.call_sync = call_sync  # type: ignore[method-assign]

    def uninstall(self) -> None:
        """Restore the host's methods."""
        for name, previous in self._saved.items():
            if previous is _ABSENT:
                vars(self.host).pop(name, None)
            else:
                setattr(self.host, name, previous)
        self._saved = {}

    def _add(
        self,
        hook: str,
        event: object,
        ctx: object,
        via: Literal["dispatch", "call_sync"],
        result: DispatchResult[Any] | None,
        error: BaseException | None,
    ) -> None:
        self.records.append(
            DispatchRecord(hook, _as_dict(event), _as_dict(ctx), via, result, error)
        )

    # queries --------------------------------------------------------------------------

    def calls(self, hook: str | None = None) -> list[DispatchRecord]:
        """Records of ``hook`` (by requested or resolved name), or all records."""
        if hook is None:
            return list(self.records)
        return [
            r
            for r in self.records
            if r.hook == hook or (r.result is not None and r.result.hook == hook)
        ]

    def last(self, hook: str | None = None) -> DispatchRecord:
        """The latest record of ``hook`` (or of any hook); ``LookupError`` when none."""
        found = self.calls(hook)
        if not found:
            what = f"of {hook!r} " if hook else ""
            seen = ", ".join(dict.fromkeys(self.hooks)) or "nothing"
            raise LookupError(f"no dispatch {what}was recorded (recorded: {seen})")
        return found[-1]

    def called(self, hook: str) -> bool:
        """Whether ``hook`` was dispatched at least once."""
        return bool(self.calls(hook))

    def count(self, hook: str | None = None) -> int:
        """How many dispatches of ``hook`` (or in all) were recorded."""
        return len(self.calls(hook))

    @property
    def hooks(self) -> list[str]:
        """The dispatched hook names in order (with repeats)."""
        return [r.hook for r in self.records]

    def clear(self) -> None:
        """Forget what was recorded so far."""
        self.records.clear()

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[DispatchRecord]:
        return iter(list(self.records))


_ABSENT: Final = object()


# -- approvals -------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCallCheck:
    """``before_tool_call`` plus the approval round-trip, as a host would run them."""

    result: DispatchResult[Any]
    verdict: ApprovalVerdict

    @property
    def outcome(self) -> ToolCallOutcome:
        return cast("ToolCallOutcome", self.result.outcome)

    @property
    def allowed(self) -> bool:
        """Whether the tool call may run (not blocked; approved when approval was asked)."""
        return self.verdict.allowed

    @property
    def params(self) -> dict[str, Any]:
        """The (possibly rewritten) parameters the tool would run with."""
        return self.outcome.params


class ApprovalScript:
    """``agentplug_approvals``: an approval resolver answering from a script.

    Decisions are looked up like :class:`~agentplug.services.approvals.ScriptedResolver`: by tool
    name first (kept), then from the queue (consumed), then the default. An approval
    nobody scripted makes the resolver fail, which the broker turns into a deny; the
    fixture also emits an :class:`AgentplugPytestWarning` naming the tool.
    """

    def __init__(self, state: _TestState) -> None:
        self._state = state
        self.by_tool: dict[str, Decision] = {}
        self.queue: list[Decision] = []
        self.default: Decision | None = None
        self.silent = False
        """When true, the resolver never answers (the request's timeout decides)."""
        self.asked: list[PendingApproval] = []
        """Every approval the resolver was asked, in order."""
        self.unscripted: list[str] = []
        """Tool names asked about with no scripted decision."""
        self._broker: ApprovalBroker | None = None

    # scripting --------------------------------------------------------------------------

    def script(
        self,
        what: str | Mapping[str, str] | Sequence[str],
        decision: str | None = None,
    ) -> ApprovalScript:
        """Script decisions; returns ``self`` so calls chain.

        ``script("web_search", "allow-once")``: that tool, every time.
        ``script({"web_search": "deny"})``: per tool.
        ``script(["allow-once", "deny"])`` or ``script("deny")``: answered in order.
        """
        if decision is not None:
            if not isinstance(what, str):
                raise TypeError("script(tool_name, decision): tool_name must be a string")
            self.by_tool[what] = _decision(decision)
        elif isinstance(what, str):
            self.queue.append(_decision(what))
        elif isinstance(what, Mapping):
            for tool, value in what.items():
                self.by_tool[str(tool)] = _decision(value)
        else:
            self.queue.extend(_decision(value) for value in what)
        return self

    def set_default(self, decision: str | None) -> ApprovalScript:
        """The decision for approvals nothing else scripted (``None``: unscripted)."""
        self.default = None if decision is None else _decision(decision)
        return self

    def never_answer(self, value: bool = True) -> ApprovalScript:
        """Never answer (to test approval timeouts; set ``timeout_ms`` in the request)."""
        self.silent = value
        return self

    # the resolver protocol --------------------------------------------------------------

    async def resolve(self, pending: PendingApproval) -> Decision:
        self.asked.append(pending)
        if self.silent:
            import asyncio

            await asyncio.Event().wait()
        if pending.tool_name in self.by_tool:
            return self.by_tool[pending.tool_name]
        if self.queue:
            return self.queue.pop(0)
        if self.default is not None:
            return self.default
        self.unscripted.append(pending.tool_name)
        warnings.warn(
            f"approval for tool {pending.tool_name!r} ({pending.request.title!r}) was asked "
            "but no decision was scripted; the broker denies it. Script one with "
            f"agentplug_approvals.script({pending.tool_name!r}, 'allow-once')",
            AgentplugPytestWarning,
            stacklevel=1,
        )
        raise LookupError(f"no scripted decision for approval of tool {pending.tool_name!r}")

    # the broker -------------------------------------------------------------------------

    @property
    def broker(self) -> ApprovalBroker:
        """An :class:`~agentplug.services.approvals.ApprovalBroker` using this resolver."""
        if self._broker is None:
            from agentplug.services.approvals import ApprovalBroker

            self._broker = ApprovalBroker(self)
        return self._broker

    async def decide(
        self, tool_name: str, outcome: ToolCallOutcome | DispatchResult[Any]
    ) -> ApprovalVerdict:
        """Run the approval round-trip of a ``before_tool_call`` outcome (or result)."""
        from agentplug.core.dispatch import DispatchResult

        model = outcome.outcome if isinstance(outcome, DispatchResult) else outcome
        return await self.broker.decide(tool_name, cast("ToolCallOutcome", model))

    def decide_sync(
        self, tool_name: str, outcome: ToolCallOutcome | DispatchResult[Any]
    ) -> ApprovalVerdict:
        """:meth:`decide` for plain tests."""
        verdict: ApprovalVerdict = self._state.run(self.decide(tool_name, outcome))
        return verdict

    async def tool_call(
        self,
        tool_name: str,
        params: Mapping[str, Any] | None = None,
        ctx: Any = None,
        **event: Any,
    ) -> ToolCallCheck:
        """Dispatch ``before_tool_call`` on ``agentplug_host``, then ask for approval."""
        payload = {"tool_name": tool_name, "params": dict(params or {}), **event}
        result = await self._state.host.dispatch("before_tool_call", payload, ctx)
        verdict = await self.decide(tool_name, result)
        return ToolCallCheck(result, verdict)

    def tool_call_sync(
        self,
        tool_name: str,
        params: Mapping[str, Any] | None = None,
        ctx: Any = None,
        **event: Any,
    ) -> ToolCallCheck:
        """:meth:`tool_call` for plain tests."""
        check: ToolCallCheck = self._state.run(self.tool_call(tool_name, params, ctx, **event))
        return check


def _decision(value: str) -> Decision:
    if value not in _DECISIONS:
        raise ValueError(f"unknown approval decision {value!r}; use one of {', '.join(_DECISIONS)}")
    return cast("Decision", value)


# -- fixtures --------------------------------------------------------------------------


@pytest.fixture
def agentplug_config(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The operator config of ``agentplug_host`` (``{}`` plus ``agentplug_config`` markers)."""
    return _with_markers({}, request.node)


@pytest.fixture
def agentplug_host(request: pytest.FixtureRequest, agentplug_config: Any) -> PluginHost:
    """An isolated host: the config above, no installed plugin unless the test asks."""
    from agentplug.core.host import PluginHost

    host = PluginHost(_with_markers(_config_mapping(agentplug_config), request.node))
    state = _state(request, host)
    marker = request.node.get_closest_marker("agentplug_entry_points")
    if marker is not None:
        if marker.args:
            loader = PluginLoader(state)
            for name in marker.args:
                loader.entry_point(str(name))
        else:
            host.load_installed(use_cache=False)
            for error in host.load_errors:
                warnings.warn(
                    f"installed agentplug plugin failed to load: {error} "
                    "(see agentplug_host.load_errors)",
                    AgentplugPytestWarning,
                    stacklevel=1,
                )
    return host


@pytest.fixture
def agentplug_load(request: pytest.FixtureRequest, agentplug_host: PluginHost) -> PluginLoader:
    """``agentplug_load(obj | "pkg.mod[:attr]" | "entry-point-name", plugin_id=None)``."""
    return PluginLoader(_state(request, agentplug_host))


@pytest.fixture
def agentplug_dispatch(request: pytest.FixtureRequest, agentplug_host: PluginHost) -> Dispatcher:
    """``agentplug_dispatch(hook, event=None, ctx=None)`` for plain (non-async) tests."""
    return Dispatcher(_state(request, agentplug_host))


@pytest.fixture
def agentplug_run(
    request: pytest.FixtureRequest, agentplug_host: PluginHost
) -> Callable[[Coroutine[Any, Any, T]], T]:
    """``agentplug_run(coro)``: run a coroutine on the test's event loop (the one the other
    sync helpers use), so handlers that outlive their budget are awaited at teardown
    instead of being cancelled by a second ``asyncio.run`` loop."""
    state = _state(request, agentplug_host)

    def run(coro: Coroutine[Any, Any, T]) -> T:
        return cast("T", state.run(coro))

    return run


@pytest.fixture
def agentplug_recorder(agentplug_host: PluginHost) -> Iterator[DispatchRecorder]:
    """Records every dispatch of ``agentplug_host`` during the test."""
    recorder = DispatchRecorder(agentplug_host)
    recorder.install()
    yield recorder
    recorder.uninstall()


@pytest.fixture
def agentplug_approvals(
    request: pytest.FixtureRequest, agentplug_host: PluginHost
) -> ApprovalScript:
    """A scriptable approval resolver with an ``ApprovalBroker`` (``.broker``)."""
    return ApprovalScript(_state(request, agentplug_host))


# -- scenario files --------------------------------------------------------------------
# Reading, preflight, comparison and the failure report live in agentplug.testing.scenario_check
# (shared with ``agentplug run``); these classes only adapt them to pytest.


class ScenarioFailure(AssertionError):
    """A scenario file did not meet its expectations (the message is the diff)."""


class _ScenarioBroken(Exception):
    """The scenario could not run (bad plugin, unknown hook, invalid event)."""


class ScenarioFile(pytest.File):
    """A ``scenario_*.json`` file: one :class:`ScenarioItem` running every step."""

    def collect(self) -> Iterator[ScenarioItem]:
        from agentplug.core.errors import AgentplugError
        from agentplug.testing.scenario_check import load_checked_scenario

        try:
            spec = load_checked_scenario(self.path)
        except AgentplugError as exc:
            raise self.CollectError(f"{self.path.name}: {exc}") from None
        yield ScenarioItem.from_parent(self, name="scenario", spec=spec)


class ScenarioItem(pytest.Item):
    """Runs a scenario file through ``build_host`` / ``run_scenario`` and checks it."""

    def __init__(self, *, spec: CheckedScenario, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.spec = spec
        description = spec.scenario.description
        if description:
            self.user_properties.append(("description", description))

    def runtest(self) -> None:
        import asyncio

        from agentplug.core.errors import AgentplugError
        from agentplug.testing.scenario import build_host
        from agentplug.testing.scenario_check import (
            ScenarioError,
            ScenarioRunError,
            check,
            preflight,
            render_failures,
            run_checked,
        )

        try:
            host = build_host(self.spec.scenario)
        except AgentplugError as exc:
            raise _ScenarioBroken(f"the scenario's plugins could not be loaded: {exc}") from exc
        try:
            preflight(host, self.spec)
        except ScenarioError as exc:
            raise _ScenarioBroken(str(exc)) from None
        try:
            reports = asyncio.run(run_checked(self.spec, host))
        except ScenarioRunError as exc:
            raise _ScenarioBroken(exc.detail) from exc.__cause__
        failures = check(self.spec, reports)
        if failures:
            raise ScenarioFailure(render_failures(self.path.name, len(reports), failures))

    def repr_failure(
        self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None
    ) -> str | TerminalRepr:
        if isinstance(excinfo.value, ScenarioFailure):
            return str(excinfo.value)
        if isinstance(excinfo.value, _ScenarioBroken):
            text = f"{self.path.name}: {excinfo.value}"
            cause = excinfo.value.__cause__
            if cause is not None and not isinstance(cause, _expected_errors()):
                import traceback

                text += "\n\n" + "".join(traceback.format_exception(cause)).rstrip()
            return text
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        return self.path, None, f"agentplug scenario {self.path.name}"


def _expected_errors() -> tuple[type[BaseException], ...]:
    from agentplug.core.errors import AgentplugError

    return (AgentplugError,)
