"""The host's action runtime: plugin-contributed, custom and host actions in one registry."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from agentplug.actions.code_handler import code_settings
from agentplug.actions.custom import (
    CustomActionServices,
    LoadResult,
    bind_runtime,
    load_custom_actions,
)
from agentplug.actions.flow import FlowResult, SimpleActionRuntime, run_action_flow
from agentplug.actions.model import Action, Message, State
from agentplug.actions.registry import ActionRegistry
from agentplug.core.errors import ConfigError
from agentplug.security.ssrf import SSRFPolicy
from agentplug.store import StateStore

if TYPE_CHECKING:
    from pathlib import Path

    from agentplug.core.host import HookHost

__all__ = ["AgentRuntime", "operator_ssrf_policy"]

log = logging.getLogger("agentplug.actions")


def operator_ssrf_policy(security: Mapping[str, Any], source: str | None = None) -> SSRFPolicy:
    """The operator's SSRF policy from ``security.ssrf`` (``allowHosts``, ``allowCidrs``,
    timeouts, ``maxResponseBytes``); errors name the key."""
    raw = security.get("ssrf", {})
    try:
        return SSRFPolicy.model_validate(raw if raw is not None else {})
    except ValidationError as exc:
        issues = [
            ("security.ssrf." + ".".join(str(p) for p in err["loc"]), err["msg"])
            for err in exc.errors()
        ]
        raise ConfigError(issues or [("security.ssrf", str(exc))], source) from None


class AgentRuntime(SimpleActionRuntime):
    """The actions of one gateway (``gateway.actions``): ``provide_actions`` results,
    config ``customActions`` and actions the host registers itself, behind
    :func:`run_action_flow`; the ``runtime`` built-in actions receive.

    ``store`` is the gateway's state store (the memory log, the restart); ``state_dir``
    roots the terminal's default working directory and the plugin manager.
    """

    def __init__(
        self,
        host: HookHost,
        services: CustomActionServices | None = None,
        *,
        store: StateStore,
        state_dir: Path | None = None,
    ) -> None:
        super().__init__(ActionRegistry())
        self.host = host
        self.store = store
        """The gateway's state store."""
        self.state_dir = state_dir
        """The gateway's state directory (``None``: none configured)."""
        self.custom_services = services
        self.custom: LoadResult | None = None
        self.loaded = False
        """Whether :meth:`load` ran (a gateway's start loads the actions once)."""
        self.disabled_builtins: list[Action] = []
        """Built-in actions left out by ``actions.disabled`` (listed, never registered)."""
        self._builtin_plugin: tuple[str, object] | None = None
        self.builtin_error: Exception | None = None
        """Why the built-in actions could not be built (invalid ``actions.*`` settings):
        :meth:`load` raises it, as the operator's config is wrong, not a plugin."""

    def use_builtins(self, plugin_id: str, plugin: object) -> None:
        """Register ``plugin`` (the built-in actions' plugin) on the host at the first
        :meth:`load`."""
        self._builtin_plugin = (plugin_id, plugin)

    async def load(self, reason: str = "startup") -> list[str]:
        """Collect plugin actions and custom actions; return problems found (readable).

        A plugin whose actions clash with another owner's is reported and skipped as a
        whole; malformed custom-action entries are reported and skipped one by one.
        """
        problems: list[str] = []
        if self._builtin_plugin is not None:
            # The built-in actions join as a bundled plugin when actions are first used,
            # so a host that never loads actions lists only the plugins it registered.
            plugin_id, plugin = self._builtin_plugin
            self._builtin_plugin = None
            self.host.register(plugin, plugin_id, bundled=True)
        self.builtin_error = None
        result = await self.host.hooks.provide_actions({"reason": reason})
        if self.builtin_error is not None:
            raise self.builtin_error
        by_plugin = self._declared_actions(problems)
        for plugin_id, provided in result.outcome.by_plugin.items():
            by_plugin[plugin_id] = [*by_plugin.get(plugin_id, []), *(provided or [])]
        for plugin_id, actions in by_plugin.items():
            self.registry.unregister_owner(plugin_id)
            try:
                self.registry.add_plugin_actions(plugin_id, actions)
            except Exception as exc:  # conflict or wrong item: name the plugin, keep going
                problems.append(str(exc))
                log.error("%s", exc)
        for handler in result.handlers:
            if handler.error:
                problems.append(f"plugin {handler.plugin_id!r}: provide_actions {handler.error}")
        config: Mapping[str, Any] = {"customActions": list(self.host.config.custom_actions)}
        self.custom = load_custom_actions(config, services=self.custom_action_services())
        for error in self.custom.errors:
            problems.append(str(error))
        self.registry.unregister_owner("custom-actions")
        for action in self.custom.actions:
            try:
                self.registry.register(action, "custom-actions")
            except Exception as exc:
                problems.append(str(exc))
        bind_runtime(self)
        self.loaded = True
        return problems

    def custom_action_services(self) -> CustomActionServices:
        """The back-ends of this host's custom actions (created on first use).

        ``http`` and ``code`` reach the network through the operator's SSRF policy
        (``security.ssrf.allowHosts`` admits, e.g., the host's own API port); ``shell``
        goes through the host's terminal runs: ``actions.shell.enabled``, the allow-list,
        the terminal service and the output hub of ``SHELL_COMMAND`` and the control API.
        """
        if self.custom_services is None:
            # Imported here: the built-ins package imports this module.
            from agentplug.actions.builtins.comms.runs import host_shell_backend

            # ``code`` actions share one sandbox whose warm pool is ``actions.code.poolSize``.
            code = code_settings(self.host.config.actions)
            services = CustomActionServices.default(
                ssrf_policy=operator_ssrf_policy(self.host.config.security),
                code_pool_size=code.pool_size,
                code_parallel=code.parallel,
            )
            self.custom_services = dataclasses.replace(services, shell=host_shell_backend(self))
        return self.custom_services

    def _declared_actions(self, problems: list[str]) -> dict[str, list[Any]]:
        """``actions = [...]`` of each plugin object (the seed's plugin shape, ACTIONS.md):
        registered as if the plugin had returned them from ``provide_actions``."""
        found: dict[str, list[Any]] = {}
        for record in self.host.plugins:
            declared = getattr(self.host.plugin_object(record.plugin_id), "actions", None)
            if declared is None or callable(declared):
                continue
            if not isinstance(declared, list | tuple):
                problems.append(
                    f"plugin {record.plugin_id!r}: 'actions' must be a list of "
                    f"agentplug.actions.Action, got {type(declared).__name__}"
                )
                continue
            found[record.plugin_id] = list(declared)
        return found

    async def run(
        self, message: Message | str, state: State | None = None, **kwargs: Any
    ) -> FlowResult:
        """Select, validate, extract parameters, execute and deliver (ACTIONS.md §2)."""
        return await run_action_flow(self, self.registry, message, state, **kwargs)
