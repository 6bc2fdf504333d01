"""Plugin-management built-in actions (ACTIONS.md §4).

``INSTALL_PLUGIN``, ``EJECT_PLUGIN``, ``SYNC_PLUGIN``, ``REINJECT_PLUGIN``,
``LIST_EJECTED_PLUGINS``, ``EJECT_CORE``, ``SYNC_CORE``, ``REINJECT_CORE`` and
``CORE_STATUS``, all backed by :class:`agentplug.plugins.manager.PluginManager` (the
``"plugin_manager"`` service of the runtime; a default one is created from
``actions.plugins``). Install, eject and reinject restart the agent afterwards
(``RESTART_AGENT``'s controller) unless ``actions.plugins.restart`` is ``false``.
Every failure is a failed :class:`ActionResult` that says what went wrong and what to do.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agentplug.actions.model import (
    Action,
    ActionParameter,
    ActionResult,
    ActionRuntime,
    HandlerOptions,
    Message,
    State,
)
from agentplug.core.errors import ConfigError
from agentplug.plugins.manager import PluginManager, PluginManagerError

if TYPE_CHECKING:
    from agentplug.actions.runtime import AgentRuntime

__all__ = ["PLUGIN_MANAGER_SERVICE", "builtin_actions", "get_plugin_manager"]

log = logging.getLogger("agentplug.builtins.plugins")

PLUGIN_MANAGER_SERVICE = "plugin_manager"
_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
_NAME_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,198}[A-Za-z0-9])?$"
_VERSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9.+!_-]{0,63}$"

Handler = Callable[
    [ActionRuntime, Message, State | None, HandlerOptions | None], Awaitable[ActionResult]
]


def get_plugin_manager(runtime: ActionRuntime) -> PluginManager:
    """The runtime's ``"plugin_manager"`` service (created from the host config if absent).

    Raises :class:`ConfigError` when ``actions.plugins`` is invalid.
    """
    found = runtime.get_service(PLUGIN_MANAGER_SERVICE)
    if isinstance(found, PluginManager):
        return found
    host = getattr(runtime, "host", None)
    # Rooted at the gateway's state directory when it has one, like the control API's.
    manager = PluginManager(host, getattr(runtime, "state_dir", None))
    register = getattr(runtime, "register_service", None)
    if callable(register):
        register(PLUGIN_MANAGER_SERVICE, manager)
    return manager


def _restart(runtime: ActionRuntime, manager: PluginManager, reason: str) -> bool:
    """Schedule a restart when enabled; return whether one was scheduled."""
    if not manager.settings.restart:
        return False
    from agentplug.actions.builtins.lifecycle import request_restart

    return request_restart(runtime, reason) is not None


def _guarded(verb: str, body: Handler) -> Handler:
    """Turn configuration and manager errors into failed results naming the verb."""

    async def handler(
        runtime: ActionRuntime,
        message: Message,
        state: State | None,
        options: HandlerOptions | None,
    ) -> ActionResult:
        try:
            return await body(runtime, message, state, options)
        except ConfigError as exc:
            return ActionResult.failure(f"Cannot {verb}: {exc}", error_type="ConfigError")
        except PluginManagerError as exc:
            params = options.parameters if options else {}
            return ActionResult.failure(
                f"Could not {verb}: {exc}", error_type="PluginManagerError", **params
            )

    return handler


def _param(options: HandlerOptions | None, name: str) -> Any:
    return (options.parameters if options else {}).get(name)


def _missing(name: str, action: str) -> ActionResult:
    return ActionResult.failure(
        f"Missing required parameter: {name}. {action} needs it: send {name}=<value>.",
        parameter=name,
    )


def _restart_note(scheduled: bool) -> str:
    return (
        " Restarting to load it..."
        if scheduled
        else " Restart the agent (RESTART_AGENT) to load it."
    )


# ---------------------------------------------------------------------------
# Handlers


async def _install(
    runtime: ActionRuntime, message: Message, state: State | None, options: HandlerOptions | None
) -> ActionResult:
    name = _param(options, "name")
    if not name:
        return _missing("name", "INSTALL_PLUGIN")
    version = _param(options, "version")
    spec = f"{name}=={version}" if version else str(name)
    manager = get_plugin_manager(runtime)
    report = await manager.install(spec, requested_by=message.entity_id)
    data = report.model_dump(mode="json")
    if not report.installed:
        findings = "; ".join(str(f.get("message")) for f in report.findings)
        extra = f" Findings: {findings}." if findings else ""
        return ActionResult(
            success=False,
            text=(
                f"Install of {report.name} {report.version} was blocked by "
                f"{report.blocked_by}: {report.reason}. Nothing was installed.{extra}"
            ),
            data=data,
        )
    scheduled = _restart(runtime, manager, f"installed plugin {report.name} {report.version}")
    data["restart_scheduled"] = scheduled
    return ActionResult(
        success=True,
        text=f"Installed {report.name} {report.version}.{_restart_note(scheduled)}",
        data=data,
    )


async def _eject(
    runtime: ActionRuntime, message: Message, state: State | None, options: HandlerOptions | None
) -> ActionResult:
    plugin_id = _param(options, "pluginId")
    if not plugin_id:
        return _missing("pluginId", "EJECT_PLUGIN")
    manager = get_plugin_manager(runtime)
    report = await manager.eject(str(plugin_id), requested_by=message.entity_id)
    scheduled = _restart(runtime, manager, f"ejected plugin {plugin_id}")
    data = {**report.model_dump(mode="json"), "restart_scheduled": scheduled}
    return ActionResult(
        success=True,
        text=(
            f"Ejected {plugin_id} ({report.distribution} {report.version}, from "
            f"{report.source_kind}) to {report.path} on branch {report.branch}; edit it there."
            f"{_restart_note(scheduled)}"
        ),
        data=data,
    )


def _sync_result(what: str, report: Any) -> ActionResult:
    data = report.model_dump(mode="json")
    if not report.merged:
        files = ", ".join(report.conflicts) or "(see message)"
        return ActionResult(
            success=False,
            text=(
                f"Syncing {what} with upstream conflicts in: {files}. The merge was aborted and "
                f"the working copy at {report.path} is clean; merge the 'upstream' branch by "
                "hand to resolve it."
            ),
            data=data,
        )
    if report.upstream_commits == 0:
        return ActionResult(
            success=True, text=f"{what} is already up to date with upstream.", data=data
        )
    return ActionResult(
        success=True,
        text=(
            f"Merged {report.upstream_commits} upstream commit(s) into {what}. Restart the "
            "agent (RESTART_AGENT) to load them."
        ),
        data=data,
    )


async def _sync(
    runtime: ActionRuntime, message: Message, state: State | None, options: HandlerOptions | None
) -> ActionResult:
    plugin_id = _param(options, "pluginId")
    if not plugin_id:
        return _missing("pluginId", "SYNC_PLUGIN")
    report = await get_plugin_manager(runtime).sync(str(plugin_id), requested_by=message.entity_id)
    return _sync_result(str(plugin_id), report)


async def _reinject(
    runtime: ActionRuntime, message: Message, state: State | None, options: HandlerOptions | None
) -> ActionResult:
    plugin_id = _param(options, "pluginId")
    if not plugin_id:
        return _missing("pluginId", "REINJECT_PLUGIN")
    manager = get_plugin_manager(runtime)
    report = await manager.reinject(str(plugin_id), requested_by=message.entity_id)
    scheduled = _restart(runtime, manager, f"reinjected plugin {plugin_id}")
    note = (
        " Restarting to load the installed package..."
        if scheduled
        else (" Restart the agent (RESTART_AGENT) to load the installed package.")
    )
    return ActionResult(
        success=True,
        text=f"Removed the ejected copy of {plugin_id} ({report.path}).{note}",
        data={**report.model_dump(mode="json"), "restart_scheduled": scheduled},
    )


async def _list(
    runtime: ActionRuntime, message: Message, state: State | None, options: HandlerOptions | None
) -> ActionResult:
    rows = get_plugin_manager(runtime).ejected()
    if not rows:
        return ActionResult(success=True, text="No plugins are ejected.", data={"plugins": []})
    lines = [f"- {r.name} (branch {r.branch or '?'}): {r.path}" for r in rows]
    return ActionResult(
        success=True,
        text=f"{len(rows)} ejected plugin(s):\n" + "\n".join(lines),
        data={"plugins": [r.model_dump(mode="json") for r in rows]},
    )


async def _eject_core(
    runtime: ActionRuntime, message: Message, state: State | None, options: HandlerOptions | None
) -> ActionResult:
    manager = get_plugin_manager(runtime)
    report = await manager.eject_core(requested_by=message.entity_id)
    scheduled = _restart(runtime, manager, "ejected agentplug core")
    return ActionResult(
        success=True,
        text=(
            f"Ejected {report.distribution} {report.version} (from {report.source_kind}) to "
            f"{report.path} on branch {report.branch}.{_restart_note(scheduled)}"
        ),
        data={**report.model_dump(mode="json"), "restart_scheduled": scheduled},
    )


async def _sync_core(
    runtime: ActionRuntime, message: Message, state: State | None, options: HandlerOptions | None
) -> ActionResult:
    manager = get_plugin_manager(runtime)
    report = await manager.sync_core(requested_by=message.entity_id)
    return _sync_result(manager.core_distribution, report)


async def _reinject_core(
    runtime: ActionRuntime, message: Message, state: State | None, options: HandlerOptions | None
) -> ActionResult:
    manager = get_plugin_manager(runtime)
    report = await manager.reinject_core(requested_by=message.entity_id)
    scheduled = _restart(runtime, manager, "reinjected agentplug core")
    return ActionResult(
        success=True,
        text=(
            f"Removed the ejected {manager.core_distribution} source ({report.path}); the "
            f"installed package runs after a restart.{_restart_note(scheduled)}"
        ),
        data={**report.model_dump(mode="json"), "restart_scheduled": scheduled},
    )


async def _core_status(
    runtime: ActionRuntime, message: Message, state: State | None, options: HandlerOptions | None
) -> ActionResult:
    status = get_plugin_manager(runtime).core_status()
    where = "an ejected source" if status.running_from == "ejected" else "the installed package"
    text = (
        f"{status.distribution} {status.version or '(unknown version)'} runs from {where} "
        f"at {status.location} (commit {status.commit or 'unknown'})."
    )
    if status.restart_required:
        text += " A restart is needed to switch to the other copy."
    return ActionResult(success=True, text=text, data=status.model_dump(mode="json"))


# ---------------------------------------------------------------------------
# Definitions


def _plugin_id(description: str) -> ActionParameter:
    return ActionParameter(
        name="pluginId",
        description=description,
        required=True,
        schema={"type": "string", "pattern": _ID_PATTERN},
    )


def builtin_actions(runtime: AgentRuntime) -> list[Action]:
    """The plugin-management actions (config problems are reported by each action)."""
    try:
        get_plugin_manager(runtime)
    except ConfigError as exc:  # every action will say so; the others still load
        log.error("%s", exc)
    return [
        Action(
            name="INSTALL_PLUGIN",
            similes=("ADD_PLUGIN", "INSTALL_PACKAGE"),
            description=(
                "Install a plugin package from the package index (checked by the install "
                "policy and before_install plugins first), then restart to load it."
            ),
            handler=_guarded("install the plugin", _install),
            side_effects=True,
            parameters=[
                ActionParameter(
                    name="name",
                    description="package name of the plugin (e.g. agentplug-weather)",
                    required=True,
                    schema={"type": "string", "pattern": _NAME_PATTERN},
                ),
                ActionParameter(
                    name="version",
                    description="exact version to install (default: the newest)",
                    schema={"type": "string", "pattern": _VERSION_PATTERN},
                ),
            ],
        ),
        Action(
            name="EJECT_PLUGIN",
            similes=("CLONE_PLUGIN", "FORK_PLUGIN"),
            description=(
                "Eject a plugin: clone or unpack its source into the local plugins folder so "
                "local edits override the installed package; restarts the agent."
            ),
            handler=_guarded("eject the plugin", _eject),
            side_effects=True,
            parameters=[_plugin_id("id of the installed plugin to eject")],
        ),
        Action(
            name="SYNC_PLUGIN",
            similes=("UPDATE_EJECTED_PLUGIN", "PULL_PLUGIN"),
            description=(
                "Fetch and merge upstream commits into an ejected plugin; reports the number "
                "of commits merged or the conflicting files."
            ),
            handler=_guarded("sync the plugin", _sync),
            side_effects=True,
            parameters=[_plugin_id("id of the ejected plugin to sync")],
        ),
        Action(
            name="REINJECT_PLUGIN",
            similes=("UNEJECT_PLUGIN", "RESTORE_PLUGIN"),
            description=(
                "Remove the ejected copy of a plugin so the installed package loads again; "
                "restarts the agent."
            ),
            handler=_guarded("reinject the plugin", _reinject),
            side_effects=True,
            parameters=[_plugin_id("id of the ejected plugin to remove")],
        ),
        Action(
            name="LIST_EJECTED_PLUGINS",
            similes=("EJECTED_PLUGINS", "SHOW_EJECTED_PLUGINS"),
            description="List every ejected plugin with its name, git branch and local path.",
            handler=_guarded("list ejected plugins", _list),
            side_effects=False,
        ),
        Action(
            name="EJECT_CORE",
            similes=("EJECT_AGENTPLUG",),
            description=(
                "Eject agentplug itself: clone its source locally so edits override the "
                "installed package; restarts the agent."
            ),
            handler=_guarded("eject the core", _eject_core),
            side_effects=True,
        ),
        Action(
            name="SYNC_CORE",
            similes=("UPDATE_CORE",),
            description=(
                "Fetch and merge upstream commits into the ejected agentplug core; reports the "
                "number of commits merged or the conflicting files."
            ),
            handler=_guarded("sync the core", _sync_core),
            side_effects=True,
        ),
        Action(
            name="REINJECT_CORE",
            similes=("UNEJECT_CORE", "RESTORE_CORE"),
            description=(
                "Remove the ejected agentplug source so the installed package runs again; "
                "restarts the agent."
            ),
            handler=_guarded("reinject the core", _reinject_core),
            side_effects=True,
        ),
        Action(
            name="CORE_STATUS",
            similes=("AGENTPLUG_STATUS", "CORE_VERSION"),
            description=(
                "Show whether agentplug runs from the installed package or an ejected source, "
                "with its version and commit hash."
            ),
            handler=_guarded("read the core status", _core_status),
            side_effects=False,
        ),
    ]
