"""The host and plugin API a gateway hands out: :class:`PluginHost`, :class:`PluginApi`.

:class:`PluginHost` is the core's :class:`~agentplug.core.host.HookHost` (registration,
plans, dispatch) with what the framework adds: the full plugin API (sessions, trusted
tool policies, actions) for ``register(api)``, the exec-env outcome filter, and a typed
link to its :class:`~agentplug.Gateway`. A host built on its own (``PluginHost(config)``)
gets its gateway on first use, so that plugins asking for ``api.session`` still work.

The shortcuts ``host.store``, ``host.sessions``, ``host.actions`` and
``host.trusted_policies`` of earlier releases still answer, with a
``DeprecationWarning``: use ``gateway.store``, ``gateway.sessions``,
``gateway.actions`` and ``gateway.policies``.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import agentplug.security.execenv  # noqa: F401  (registers the ``exec_env`` outcome filter)
from agentplug.core.config import AgentplugConfig
from agentplug.core.host import HookApi, HookHost, PluginRecord

if TYPE_CHECKING:
    from agentplug.actions.runtime import AgentRuntime
    from agentplug.gateway.assembly import Gateway
    from agentplug.services.policies import TrustedToolPolicies, TrustedToolPolicy
    from agentplug.services.sessions import SessionApi, SessionServices
    from agentplug.store import StateStore

__all__ = ["PluginApi", "PluginHost"]


class PluginApi(HookApi):
    """What ``register(api)`` receives: hooks, sessions, trusted tool policies, actions."""

    @property
    def gateway(self) -> Gateway:
        """The gateway this plugin runs in."""
        host = self.host
        assert isinstance(host, PluginHost)
        return host.gateway

    @property
    def session(self) -> SessionApi:
        """Session services: ``api.session.state`` and ``api.session.workflow``."""
        return self.gateway.sessions.api_for(self.record)

    @property
    def actions(self) -> AgentRuntime:
        """The gateway's actions (register services such as media providers on it)."""
        return self.gateway.actions

    def register_trusted_tool_policy(
        self, policy_id: str, evaluate: Callable[..., Any], *, description: str = ""
    ) -> TrustedToolPolicy:
        """Register a trusted tool policy (runs before ordinary ``before_tool_call``).

        Installed plugins must be explicitly enabled and declare ``policy_id`` in
        ``plugins.entries.<id>.contracts.trusted_tool_policies``.
        """
        return self.gateway.policies.register(
            self.record, policy_id, evaluate, description=description
        )

    def register_session_extension(self, *args: Any, **kwargs: Any) -> Any:
        """Deprecated alias of ``api.session.state.register_session_extension``."""
        self.warn_deprecated(
            "api.register_session_extension", "api.session.state.register_session_extension"
        )
        return self.session.state.register_session_extension(*args, **kwargs)

    def enqueue_next_turn_injection(self, *args: Any, **kwargs: Any) -> Any:
        """Deprecated alias of ``api.session.workflow.enqueue_next_turn_injection``."""
        self.warn_deprecated(
            "api.enqueue_next_turn_injection", "api.session.workflow.enqueue_next_turn_injection"
        )
        return self.session.workflow.enqueue_next_turn_injection(*args, **kwargs)


def _plugin_api(host: HookHost, record: PluginRecord) -> HookApi:
    return PluginApi(host, record)


class PluginHost(HookHost):
    """Registers plugins and dispatches hooks with agentplug's rules (HOOKS.md §2).

    ``await host.hooks.before_tool_call({"tool_name": "exec", "params": {...}})`` returns
    a :class:`~agentplug.DispatchResult` with the reduced ``outcome`` and per-handler
    ``handlers`` (``host.dispatch("name", ...)`` for hooks added at run time). The
    services live on :attr:`gateway`; ``store`` and ``state_dir`` seed it when this host
    is built on its own.
    """

    def __init__(
        self,
        config: AgentplugConfig | Mapping[str, Any] | None = None,
        *,
        builtin_hooks: bool = True,
        store: StateStore | None = None,
        state_dir: str | Path | None = None,
        gateway: Gateway | None = None,
    ) -> None:
        super().__init__(config, builtin_hooks=builtin_hooks, api_factory=_plugin_api)
        self._gateway = gateway
        self._seed = (store, state_dir)

    @property
    def gateway(self) -> Gateway:
        """The gateway holding this host's services (built on first use when none was)."""
        if self._gateway is None:
            from agentplug.gateway.assembly import Gateway

            store, state_dir = self._seed
            self._gateway = Gateway(self.config, host=self, store=store, state_dir=state_dir)
        return self._gateway

    def _moved(self, old: str, new: str) -> Gateway:
        warnings.warn(
            f"host.{old} is deprecated; use gateway.{new} (agentplug.Gateway holds the "
            "services; host.gateway is this host's)",
            DeprecationWarning,
            stacklevel=3,
        )
        return self.gateway

    @property
    def store(self) -> StateStore:
        """Deprecated: ``gateway.store``."""
        return self._moved("store", "store").store

    @property
    def sessions(self) -> SessionServices:
        """Deprecated: ``gateway.sessions``."""
        return self._moved("sessions", "sessions").sessions

    @property
    def actions(self) -> AgentRuntime:
        """Deprecated: ``gateway.actions``."""
        return self._moved("actions", "actions").actions

    @property
    def trusted_policies(self) -> TrustedToolPolicies:
        """Deprecated: ``gateway.policies``."""
        return self._moved("trusted_policies", "policies").policies

    @property
    def state_dir(self) -> Path | None:
        """Deprecated: ``gateway.state_dir``."""
        return self._moved("state_dir", "state_dir").state_dir
