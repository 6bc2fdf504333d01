"""``RESTART_AGENT``: a controlled restart of the agent (ACTIONS.md §4).

The action persists a ``"Restarting..."`` memory
(:class:`~agentplug.actions.builtins.memory.MemoryLog`), returns its reply at once, and
restarts ``delay_s`` (1.5 s) later so the reply can flush.
How the restart happens is decided by the :class:`RestartController` the host or the CLI
registers as the ``"restart"`` service (``runtime.register_service("restart", ...)``):

* **CLI mode** (``mode="cli"``): ``gateway_stop`` is dispatched (bounded), then the process
  exits with code 75 (``EX_TEMPFAIL``) so its supervisor
  (:func:`agentplug.plugins.supervisor.supervise`,
  ``agentplug supervise -- ...``) starts it again.
* **Embedded mode** (``mode="embedded"``, the default unless ``AGENTPLUG_SUPERVISED=1``):
  restart in process: dispatch ``gateway_stop``, reload changed plugins
  (:func:`reload_changed_plugins`: plugins whose distribution version or ejected source
  changed are unregistered, their modules dropped and loaded again; removed plugins are
  unregistered; new ones load), collect actions again, dispatch ``gateway_start``.

A hook that hangs cannot block a restart: ``gateway_stop`` gets ``stop_budget_s`` (5 s) in
total, after which the dispatch is abandoned (tracked by ``host.tracker``, not awaited).

Settings (``actions.restart``)::

    {"actions": {"restart": {"delay_s": 1.5, "stop_budget_s": 5, "start_budget_s": 30}}}
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agentplug.actions.builtins.memory import MemoryLog
from agentplug.actions.model import (
    Action,
    ActionExample,
    ActionParameter,
    ActionResult,
    ActionRuntime,
    HandlerOptions,
    Message,
    State,
)
from agentplug.core.errors import ConfigError

if TYPE_CHECKING:
    from agentplug.actions.runtime import AgentRuntime
    from agentplug.core.host import PluginHost

__all__ = [
    "RESTART_EXIT_CODE",
    "RESTART_SERVICE",
    "ReloadReport",
    "RestartController",
    "RestartReport",
    "RestartSettings",
    "builtin_actions",
    "get_restart_controller",
    "plugin_snapshot",
    "reload_changed_plugins",
    "request_restart",
    "restart_settings",
]

log = logging.getLogger("agentplug.restart")

RESTART_EXIT_CODE = 75
"""``EX_TEMPFAIL``: exit code asking the supervisor to start the agent again."""
RESTART_SERVICE = "restart"
"""Service name of the :class:`RestartController` (``runtime.get_service("restart")``)."""
RESTART_TEXT = "Restarting..."
_PROTECTED_MODULES = frozenset({"agentplug", "agentplug_hookspecs", "pluggy", "pydantic"})

RestartMode = Literal["cli", "embedded"]


class RestartSettings(BaseModel):
    """``actions.restart``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    delay_s: float = Field(default=1.5, ge=0, alias="delayS")
    """Pause between the reply and the restart (lets the reply flush)."""
    stop_budget_s: float = Field(default=5.0, gt=0, alias="stopBudgetS")
    """Total time given to ``gateway_stop`` handlers; the rest are abandoned."""
    start_budget_s: float = Field(default=30.0, gt=0, alias="startBudgetS")
    """Total time given to ``gateway_start`` handlers in embedded mode."""
    mode: RestartMode | None = None
    """Force a mode; default: ``cli`` when supervised (``AGENTPLUG_SUPERVISED=1``)."""


def restart_settings(actions: Mapping[str, Any] | None) -> RestartSettings:
    """Validate ``actions.restart``; raise :class:`ConfigError` naming ``actions.restart.*``."""
    raw = (actions or {}).get("restart") or {}
    try:
        return RestartSettings.model_validate(raw)
    except ValidationError as exc:
        issues = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err["loc"])
            problem = (
                "unknown setting; known: delay_s, stop_budget_s, start_budget_s, mode"
                if err["type"] == "extra_forbidden"
                else f"{err['msg']} (got {err.get('input')!r})"
            )
            issues.append(("actions.restart" + (f".{where}" if where else ""), problem))
        raise ConfigError(issues) from None


# ---------------------------------------------------------------------------
# Reports


class ReloadReport(BaseModel):
    """What :func:`reload_changed_plugins` did."""

    reloaded: list[str] = Field(default_factory=list)
    removed: list[str] = Field(default_factory=list)
    added: list[str] = Field(default_factory=list)
    errors: list[str] = Field(default_factory=list)


class RestartReport(BaseModel):
    """What one restart did."""

    mode: RestartMode
    reason: str | None = None
    stop_timed_out: bool = False
    """``gateway_stop`` did not finish within ``stop_budget_s``; its handlers were abandoned."""
    stop_pending: list[str] = Field(default_factory=list)
    """Handlers (``plugin:hook``) still running when the restart went on without them."""
    start_timed_out: bool = False
    reload: ReloadReport = Field(default_factory=ReloadReport)
    action_problems: list[str] = Field(default_factory=list)
    duration_ms: float = 0.0


# ---------------------------------------------------------------------------
# Plugin change detection and reload


def _state_dir(host: PluginHost) -> Path:
    from agentplug.plugins.ejected import resolve_state_dir

    return resolve_state_dir(host)


def plugin_snapshot(host: PluginHost, state_dir: Path | None = None) -> dict[str, str]:
    """A fingerprint per installed plugin id: distribution, version and ejected source."""
    from agentplug.core.loader import ENTRY_POINT_GROUP, discover
    from agentplug.plugins.ejected import plugins_root
    from agentplug.plugins.manager import source_fingerprint

    root = plugins_root(state_dir or _state_dir(host))
    snapshot: dict[str, str] = {}
    for found in discover(ENTRY_POINT_GROUP, use_cache=False):
        ejected = source_fingerprint(root / found.name) if found.name else ""
        snapshot[found.name] = f"{found.distribution}=={found.version}|{ejected}"
    return snapshot


def _purge_modules(entry_value: str | None) -> list[str]:
    """Drop the modules of a plugin entry point (``pkg.mod:obj``) from ``sys.modules``."""
    if not entry_value:
        return []
    module = entry_value.split(":", 1)[0].strip()
    top = module.split(".", 1)[0]
    if not module:
        return []
    protected = top in _PROTECTED_MODULES or top in sys.stdlib_module_names
    prefix = module if protected else top
    doomed = [n for n in sys.modules if n == prefix or n.startswith(prefix + ".")]
    for name in doomed:
        sys.modules.pop(name, None)
    return doomed


def reload_changed_plugins(
    host: PluginHost,
    baseline: Mapping[str, str] | None = None,
    *,
    state_dir: Path | None = None,
    runtime: AgentRuntime | None = None,
) -> ReloadReport:
    """Reload installed plugins that changed since ``baseline`` (see :func:`plugin_snapshot`).

    A registered (non-bundled) plugin is reloaded when its distribution version differs
    from the one it was registered with, or its fingerprint differs from ``baseline``
    (version or ejected source changed, the copy was ejected or reinjected). It is
    unregistered (with its actions), its modules are dropped from ``sys.modules``, the
    ejected copy (if any) is put first on ``sys.path``, and ``load_installed`` loads it
    again. Registered plugins no longer installed are unregistered; newly installed
    plugins load. Failures are reported in ``errors`` (and ``host.load_errors``).
    """
    from agentplug.core.loader import ENTRY_POINT_GROUP, discover
    from agentplug.plugins.manager import activate_ejected_source, activate_install_target

    folder = state_dir or _state_dir(host)
    report = ReloadReport()
    with contextlib.suppress(ConfigError):  # reported by the plugin actions
        activate_install_target(host)
    found = {p.name: p for p in discover(ENTRY_POINT_GROUP, use_cache=False)}
    current = plugin_snapshot(host, folder)
    records = {r.plugin_id: r for r in host.plugins if not r.bundled}
    for pid, record in records.items():
        if pid not in found:
            report.removed.append(pid)
        elif record.version != found[pid].version or (
            baseline is not None and baseline.get(pid) != current.get(pid)
        ):
            report.reloaded.append(pid)
    for pid in report.removed + report.reloaded:
        record = records[pid]
        with contextlib.suppress(KeyError):
            host.unregister(pid)
        if runtime is not None:
            runtime.registry.unregister_owner(pid)
        _purge_modules(record.source)
    for pid in found:
        if pid in report.reloaded or pid not in records:
            activate_ejected_source(folder, pid)
    importlib.invalidate_caches()
    errors_before = len(host.load_errors)
    # Plugins that failed before are retried: forget their old failure records.
    host.failed_plugins[:] = [r for r in host.failed_plugins if r.plugin_id not in found]
    loaded = host.load_installed(use_cache=False)
    fresh = host.load_errors[errors_before:]
    # Re-adding an already added hookspec module is not a failure of this reload.
    kept = [e for e in fresh if "already registered within namespace" not in str(e)]
    del host.load_errors[errors_before:]
    host.load_errors.extend(kept)
    host.failed_plugins[:] = [
        r
        for r in host.failed_plugins
        if not (r.error and "already registered within namespace" in r.error)
    ]
    report.errors = [str(e) for e in kept]
    report.added = [r.plugin_id for r in loaded if r.plugin_id not in report.reloaded]
    reloaded_ok = {r.plugin_id for r in loaded}
    for pid in report.reloaded:
        if pid not in reloaded_ok:
            log.error("plugin %s changed but could not be loaded again", pid)
    return report


# ---------------------------------------------------------------------------
# The controller


def _default_exit(code: int) -> None:
    """Flush and end the process now (threads of abandoned handlers cannot hold it)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    logging.shutdown()
    os._exit(code)


class RestartController:
    """Decides and performs restarts; register it as the ``"restart"`` service.

    ``mode`` is ``"cli"`` (exit with :data:`RESTART_EXIT_CODE` for the supervisor) or
    ``"embedded"`` (restart in process). ``exit_fn`` ends the process in CLI mode (default:
    flush and ``os._exit``). :meth:`schedule` is what ``RESTART_AGENT`` calls; a restart
    already scheduled is not scheduled twice. :meth:`wait` returns the next report.
    """

    def __init__(
        self,
        mode: RestartMode = "embedded",
        *,
        delay_s: float = 1.5,
        stop_budget_s: float = 5.0,
        start_budget_s: float = 30.0,
        exit_code: int = RESTART_EXIT_CODE,
        exit_fn: Callable[[int], None] | None = None,
        state_dir: str | Path | None = None,
        finalizer: Any = None,
    ) -> None:
        if mode not in ("cli", "embedded"):
            raise ValueError(f"restart mode must be 'cli' or 'embedded', not {mode!r}")
        self.mode: RestartMode = mode
        self.delay_s = delay_s
        self.stop_budget_s = stop_budget_s
        self.start_budget_s = start_budget_s
        self.exit_code = exit_code
        self.exit_fn = exit_fn or _default_exit
        self.state_dir = Path(state_dir) if state_dir is not None else None
        self.finalizer = finalizer
        """Optional :class:`agentplug.services.lifecycle.ShutdownFinalizer`: when set, the
        stop phase
        is ``finalizer.finalize("restart")`` (``session_end`` for active sessions, then
        ``gateway_stop``, bounded by the finalizer's own budget) instead of ``gateway_stop``
        alone."""
        self.reports: list[RestartReport] = []
        self._baseline: dict[str, str] | None = None
        self._task: asyncio.Task[RestartReport] | None = None
        self._waiters: list[asyncio.Future[RestartReport]] = []

    @classmethod
    def from_config(
        cls, actions: Mapping[str, Any] | None = None, **overrides: Any
    ) -> RestartController:
        """Build from ``actions.restart``; mode ``cli`` when ``AGENTPLUG_SUPERVISED=1``."""
        settings = restart_settings(actions)
        mode = settings.mode or (
            "cli" if os.environ.get("AGENTPLUG_SUPERVISED") == "1" else "embedded"
        )
        kwargs: dict[str, Any] = {
            "delay_s": settings.delay_s,
            "stop_budget_s": settings.stop_budget_s,
            "start_budget_s": settings.start_budget_s,
            **overrides,
        }
        return cls(kwargs.pop("mode", mode), **kwargs)

    @property
    def pending(self) -> bool:
        """Whether a restart is scheduled or running."""
        return self._task is not None and not self._task.done()

    def attach(self, host: PluginHost) -> None:
        """Remember the installed plugins' fingerprints (the reload baseline)."""
        if self._baseline is None:
            try:
                self._baseline = plugin_snapshot(host, self._folder(host))
            except Exception as exc:  # discovery problems must not break startup
                log.warning("restart baseline not taken: %s", exc)

    def _folder(self, host: PluginHost) -> Path:
        return self.state_dir or _state_dir(host)

    def schedule(
        self, host: PluginHost, reason: str | None = None, runtime: AgentRuntime | None = None
    ) -> asyncio.Task[RestartReport]:
        """Restart ``delay_s`` from now (in the running loop); coalesces duplicates."""
        if self._task is not None and not self._task.done():
            return self._task
        self.attach(host)
        self._task = asyncio.get_running_loop().create_task(
            self._delayed(host, reason, runtime), name="agentplug-restart"
        )
        return self._task

    async def _delayed(
        self, host: PluginHost, reason: str | None, runtime: AgentRuntime | None
    ) -> RestartReport:
        if self.delay_s > 0:
            await asyncio.sleep(self.delay_s)
        return await self.restart(host, reason, runtime)

    async def wait(self, timeout_s: float | None = None) -> RestartReport:
        """The report of the scheduled (or last scheduled) restart; without any, of the
        next restart."""
        if self._task is not None:
            return await asyncio.wait_for(asyncio.shield(self._task), timeout_s)
        future: asyncio.Future[RestartReport] = asyncio.get_running_loop().create_future()
        self._waiters.append(future)
        return await asyncio.wait_for(future, timeout_s)

    async def restart(
        self, host: PluginHost, reason: str | None = None, runtime: AgentRuntime | None = None
    ) -> RestartReport:
        """Restart now: stop (bounded), then exit 75 (CLI) or reload and start (embedded)."""
        started = time.perf_counter()
        log.warning("restarting agent (%s mode): %s", self.mode, reason or "no reason given")
        report = RestartReport(mode=self.mode, reason=reason)
        report.stop_timed_out, report.stop_pending = await self._stop(host)
        if self.mode == "cli":
            report.duration_ms = round((time.perf_counter() - started) * 1000, 3)
            self._finish(report)
            if runtime is not None:
                with contextlib.suppress(Exception):
                    runtime.store.close()
            self.exit_fn(self.exit_code)
            return report
        self.attach(host)
        folder = self._folder(host)
        try:
            # In the loop thread: registration mutates the host, which hooks read.
            report.reload = reload_changed_plugins(
                host, self._baseline, state_dir=folder, runtime=runtime
            )
        except Exception as exc:  # a failed reload still starts the gateway again
            log.exception("reloading plugins failed")
            report.reload = ReloadReport(errors=[f"reload failed: {exc!r}"])
        if runtime is not None:
            try:
                report.action_problems = await runtime.load("restart")
            except Exception as exc:
                report.action_problems = [f"collecting actions failed: {exc!r}"]
        report.start_timed_out, _ = await self._bounded_dispatch(
            host, "gateway_start", self.start_budget_s
        )
        try:
            self._baseline = plugin_snapshot(host, folder)
        except Exception as exc:
            log.warning("restart baseline not refreshed: %s", exc)
        report.duration_ms = round((time.perf_counter() - started) * 1000, 3)
        log.warning(
            "agent restarted in %.0f ms (reloaded %s, removed %s, added %s)",
            report.duration_ms,
            report.reload.reloaded,
            report.reload.removed,
            report.reload.added,
        )
        self._finish(report)
        return report

    def _finish(self, report: RestartReport) -> None:
        self.reports.append(report)
        waiters, self._waiters = self._waiters, []
        for future in waiters:
            if not future.done():
                future.set_result(report)

    async def _stop(self, host: PluginHost) -> tuple[bool, list[str]]:
        if self.finalizer is None:
            return await self._bounded_dispatch(host, "gateway_stop", self.stop_budget_s)
        task = asyncio.ensure_future(self.finalizer.finalize("restart"))
        budget = float(getattr(self.finalizer, "timeout_s", self.stop_budget_s)) + 1.0
        done, _ = await asyncio.wait({task}, timeout=budget)
        if not done or task.exception() is not None:
            if not done:
                host.tracker.track(task, "restart:finalize")
            else:
                log.warning("shutdown finalizer failed during restart: %r", task.exception())
            return True, ["restart:finalize", *host.tracker.pending]
        finalized = task.result()
        return bool(finalized.timed_out), list(finalized.pending)

    async def _bounded_dispatch(
        self, host: PluginHost, hook: str, budget_s: float
    ) -> tuple[bool, list[str]]:
        """Dispatch ``hook`` but wait at most ``budget_s``; abandon (not cancel) the rest."""
        task = asyncio.ensure_future(
            host.dispatch(hook, {"reason": "restart"}, {"reason": "restart"})
        )
        done, _ = await asyncio.wait({task}, timeout=budget_s)
        if not done:
            host.tracker.track(task, f"restart:{hook}")
            pending = [f"restart:{hook}", *host.tracker.pending]
            log.warning(
                "%s did not finish within %.1fs; restarting without waiting for: %s",
                hook,
                budget_s,
                ", ".join(dict.fromkeys(pending)),
            )
            return True, list(dict.fromkeys(pending))
        if task.exception() is not None:
            log.warning("%s failed during restart: %r", hook, task.exception())
            return False, []
        pending = [
            f"{r.plugin_id}:{r.hook}" for r in task.result().handlers if r.status == "timeout"
        ]
        return bool(pending), pending


def get_restart_controller(runtime: ActionRuntime) -> RestartController:
    """The runtime's ``"restart"`` service; a default one is registered when absent."""
    found = runtime.get_service(RESTART_SERVICE)
    if isinstance(found, RestartController):
        return found
    host = getattr(runtime, "host", None)
    actions = host.config.actions if host is not None else None
    try:
        controller = RestartController.from_config(actions)
    except ConfigError as exc:  # keep restarts possible; the operator sees the error
        log.error("%s (using the default restart settings)", exc)
        controller = RestartController.from_config(None)
    register = getattr(runtime, "register_service", None)
    if callable(register):
        register(RESTART_SERVICE, controller)
    return controller


def request_restart(runtime: ActionRuntime, reason: str | None) -> RestartController | None:
    """Schedule a restart through the runtime's controller (``None`` without a host)."""
    host = getattr(runtime, "host", None)
    if host is None:
        return None
    controller = get_restart_controller(runtime)
    agent_runtime = runtime if hasattr(runtime, "registry") and hasattr(runtime, "load") else None
    controller.schedule(host, reason, agent_runtime)  # type: ignore[arg-type]
    return controller


# ---------------------------------------------------------------------------
# The action


async def _restart_handler(
    runtime: ActionRuntime,
    message: Message,
    state: State | None,
    options: HandlerOptions | None,
) -> ActionResult:
    params = options.parameters if options else {}
    reason = params.get("reason") or None
    store = getattr(runtime, "store", None)
    if getattr(runtime, "host", None) is None or store is None:
        return ActionResult.failure(
            "RESTART_AGENT needs a gateway's action runtime (runtime.host and runtime.store); "
            "none is available here."
        )
    controller = get_restart_controller(runtime)
    if getattr(controller, "pending", False):
        return ActionResult(
            success=True,
            text="A restart is already scheduled.",
            data={"mode": controller.mode, "already_scheduled": True},
        )
    log.warning("RESTART_AGENT requested (reason: %s)", reason or "none given")
    memory = MemoryLog(store).add(
        RESTART_TEXT,
        kind="restart",
        room_id=message.room_id,
        entity_id=message.entity_id,
        data={"action": "RESTART_AGENT", "reason": reason, "mode": controller.mode},
    )
    request_restart(runtime, reason)
    return ActionResult(
        success=True,
        text=RESTART_TEXT,
        data={
            "mode": controller.mode,
            "delay_s": controller.delay_s,
            "reason": reason,
            "memory_id": memory.id,
        },
    )


def builtin_actions(runtime: AgentRuntime) -> list[Action]:
    """``RESTART_AGENT``; also sets up the restart controller and its reload baseline."""
    controller = get_restart_controller(runtime)
    if isinstance(controller, RestartController):
        controller.attach(runtime.host)
    return [
        Action(
            name="RESTART_AGENT",
            similes=("REBOOT", "RELOAD", "RESTART", "REBOOT_AGENT", "RELOAD_AGENT"),
            description=(
                "Restart the agent in a controlled way: stop the runtime (gateway_stop), "
                "reload changed plugins and start again. Use after installing, ejecting or "
                "reinjecting plugins, or when asked to restart/reboot/reload."
            ),
            handler=_restart_handler,
            side_effects=True,  # stops and restarts the gateway
            parameters=[
                ActionParameter(
                    name="reason",
                    description="why the restart is requested (logged for diagnostics)",
                    required=False,
                    schema={"type": "string"},
                )
            ],
            examples=[
                [
                    ActionExample(name="user", text="Please restart yourself"),
                    ActionExample(name="agent", text=RESTART_TEXT, actions=["RESTART_AGENT"]),
                ]
            ],
        )
    ]
